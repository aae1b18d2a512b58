"""Distloop's desktop app (PySide6). Never imports TensorFlow: engines run in subprocesses."""
