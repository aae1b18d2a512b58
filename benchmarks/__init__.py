"""Benchmarks: every result is a ratio against a baseline measured in the same run.

``--quick`` on any benchmark's command line runs it on tiny sizes (``benchmarks.quick``).
"""

from benchmarks.quick import take_quick_flag

take_quick_flag()
