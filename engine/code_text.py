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


SHOWN_CHARS = 80
"""Characters of an untrusted value a message quotes: enough to recognise it."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """An untrusted value quoted for a one-line message, as ``repr`` would (a string in
    quotes), escaped as :func:`inert` escapes, and cut to ``limit`` characters with how
    many were left out.

    A value read from a crafted file or variable may be megabytes long or hold terminal
    escapes; quoted whole, one refusal would flood the terminal or rewrite what it
    shows. Every message that quotes such a value quotes it through here.
    """
    if not isinstance(value, str):
        return shortened(repr(value), limit)  # a number or None reads as repr writes it
    head, rest = _cut(value, limit)
    return f"'{head}'{rest}"


def shortened(text: str, limit: int = SHOWN_CHARS) -> str:
    """Untrusted text (another program's error, a stored version) as :func:`shown`
    writes it, without quotes: it is the message's words, not a value in them."""
    head, rest = _cut(text, limit)
    return head + rest


def _cut(text: str, limit: int) -> tuple[str, str]:
    if len(text) > limit:
        return inert(text[:limit]), f"... ({len(text)} characters)"
    return inert(text), ""
