"""Distloop's engine: project models, the process protocol and the TensorFlow training loop.

Only the modules named in ``engine.tf.training`` and below import TensorFlow; the
configuration (``engine.config``, ``engine.tf_config``), the message protocol
(``engine.messages``) and the parent-side process handle (``engine.process``) stay
TensorFlow-free so the GUI can use them without paying TensorFlow's import time.
"""

__version__ = "0.1.0"
