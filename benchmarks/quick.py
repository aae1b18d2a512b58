"""Quick mode: every benchmark's own code on tiny sizes, in seconds, so the test suite runs
each one (``tests/benchmarks/test_benchmarks.py``) and a rename breaks a test, not a benchmark found
broken weeks later.

``--quick`` anywhere on a benchmark's command line (``python -m benchmarks.gui_bench
--quick``) turns it on: the package (``benchmarks/__init__.py``) takes the flag out of
``sys.argv`` before the benchmark reads its own arguments, and sets
:data:`QUICK_VARIABLE`, which the processes a benchmark starts inherit. Sizes too small
to measure anything are not results: in quick mode every line a benchmark prints starts
with :data:`NOT_A_RESULT`, and nothing is written to RESULTS.md (no benchmark writes it;
its numbers come from full runs).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO, TypeVar

QUICK_FLAG = "--quick"
QUICK_VARIABLE = "DISTLOOP_BENCH_QUICK"
NOT_A_RESULT = "[quick: tiny sizes, not a result] "

T = TypeVar("T")


def take_quick_flag() -> None:
    """Turns quick mode on for ``--quick`` (removed from ``sys.argv``), and marks this
    process's printed lines as no results when it is on."""
    if QUICK_FLAG in sys.argv:
        sys.argv = [argument for argument in sys.argv if argument != QUICK_FLAG]
        os.environ[QUICK_VARIABLE] = "1"
    if quick() and not isinstance(sys.stdout, _NotResults):
        sys.stdout = _NotResults(sys.stdout)


def quick() -> bool:
    return os.environ.get(QUICK_VARIABLE) == "1"


def sized(full: T, small: T) -> T:
    """``full`` in a benchmark's real run, ``small`` in quick mode: the one switch each
    benchmark uses for its sizes, rounds and waits."""
    return small if quick() else full


class _NotResults:
    """Standard output with :data:`NOT_A_RESULT` at the start of every line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._line_start = True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            if self._line_start:
                self._out.write(NOT_A_RESULT)
            self._out.write(piece)
            self._line_start = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self._out, name)
