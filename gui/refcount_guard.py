"""Keeps None, True and False alive under PySide6 builds that forget to reference them.

PySide6 6.12.0 returns ``None`` from every void C++ call (``setText``,
``setValue``, ``processEvents`` ...) and ``True``/``False`` from ``Signal.emit``
without taking a reference. On Python 3.12 and later these singletons are
immortal (PEP 683), so the missing reference is harmless; on Python 3.11 every
such call takes one reference away, a GUI makes thousands a second, and the app
aborts with "none_dealloc: deallocating None" seconds into a fast run.

:func:`protect_singletons` gives the three singletons a reference count no
program can use up, which is what Python 3.12 does for every immortal object.
It touches nothing else and is a no-op where the interpreter already protects them.
"""

from __future__ import annotations

import ctypes
import sys

RESERVE = 1 << 48  # references; at a million lost per second, nine years of use
_protected = False


def protect_singletons() -> None:
    """Adds :data:`RESERVE` references to None, True and False once per process."""
    global _protected
    if _protected or sys.version_info >= (3, 12):
        return
    for singleton in (None, True, False):
        # ob_refcnt is a PyObject's first field (a Py_ssize_t) in every non-debug build.
        ctypes.c_ssize_t.from_address(id(singleton)).value += RESERVE
    _protected = True
