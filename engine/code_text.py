"""User text inside generated programs (exported scripts, shell files, manifests' comments).

A project's name, a path or a host comes from a file someone else may have written. Put
raw into a docstring, ``\"\"\"`` ends it and what follows runs when the script runs; put raw
into a comment, a line break starts a line of code. Every generator writes such text
through :func:`inert`, and text that is code (a string literal, a shell word) through
``repr`` or ``shlex.quote``.
"""

from __future__ import annotations

_ESCAPES = {"\\": "\\\\", '"': '\\"'}
_LINE_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def inert(text: str) -> str:
    """``text`` as one line of printable characters that cannot end a comment or a string.

    Backslashes, double quotes and every character that is not printable (line breaks,
    control characters, bidirectional marks, lone surrogates) are written as Python
    escapes, so inside a double-quoted Python string or docstring the text reads back
    exactly as ``text``, and in a comment of any language it stays on its line.
    Printable characters, accented letters included, stay as they are.
    """
    return printable("".join(_ESCAPES.get(char, char) for char in text))


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` as a terminal or a log shows it without being steered by it: every character
    that is not printable (a terminal escape that erases the line above, a carriage
    return, a bidirectional mark that reverses what follows) written as a Python escape.
    ``lines`` keeps line breaks and tabs, for text of several lines (a traceback).

    For what another machine or a file from anyone says, printed in a notice.
    """
    out = []
    for char in text:
        if char.isprintable() or (lines and char in "\n\t"):
            out.append(char)
        elif char in _LINE_ESCAPES:
            out.append(_LINE_ESCAPES[char])
        elif ord(char) <= 0xFF:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out)
