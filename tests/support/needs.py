"""What a test needs of this machine beyond Python: root, hosts with their own sshd, a
Slurm. Each is a pytest marker (``root``, ``sshd``, ``slurm``, registered in
pyproject.toml): ``tests/conftest.py`` skips a marked test with one line where its need
is missing, so a test never checks for itself, and ``-m "not slurm"`` leaves out every
test that would start a Slurm. The helpers that start hosts or daemons refuse to run in a
test not marked for them (:func:`require`), so the markers cannot drift from what the
tests do."""

from __future__ import annotations

import os

_marked: frozenset[str] | None = None
"""The needs the running test is marked with (set before its fixtures start); None
outside pytest (a benchmark starting hosts of its own)."""


def entering(markers: frozenset[str]) -> None:
    """Called as each test's setup begins, before any of its fixtures."""
    global _marked
    _marked = markers


def require(need: str) -> None:
    """Raises unless the running test is marked with ``need``: an unmarked test that starts
    sshd hosts or a Slurm would be run by ``-m "not sshd"`` and fail there instead of
    being left out."""
    if _marked is not None and need not in _marked:
        raise RuntimeError(f"a test that starts this needs @pytest.mark.{need}")


def root_reason() -> str | None:
    """Why root's tests cannot run here, or None."""
    return None if os.geteuid() == 0 else "needs root"
