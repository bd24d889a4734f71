"""Text from a trace, made safe to show on a terminal.

A trace is a file someone may have sent you: its kernel names, op names, thread
labels, paths and capture fields are arbitrary strings. Written raw, an ESC in
a name is an escape sequence (OSC 52 writes the clipboard, OSC 0 retitles the
window, CSI repaints the screen), and a bidi override reorders what you read.

``printable(text)`` writes every such character as visible text instead:
``\\x1b``, ``\\x07``, ``\\x0a``, ``\\x9b``, ``\\u202e``. Ordinary non-ASCII text
(µ, CJK, emoji) is kept. A name without any of them is returned as it is, after
one ``str.isprintable`` (and, for the few names it rejects, one precompiled regex
search): about 0.1 µs for a kernel name, so calling it on every name drawn costs little.

Use it at the output boundaries (tables, screens, error lines); the data layer
keeps the exact names for JSON and for matching. ``json_safe(text)`` does the
same for serialised JSON, where the characters become ``\\uNNNN`` escapes: the
document still parses to the exact strings.

No Textual or Rich import here: the CLI's plain-text reports use it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# C0 controls (tab and newline included: inside a name they would break a row), then the rest:
# DEL, C1 controls (8-bit CSI, OSC, ...), the bidi marks, embeddings, overrides and isolates,
# the Arabic letter mark, and the Unicode line/paragraph separators. JSON encoders escape C0
# themselves and write the rest raw.
_C0 = "\x00-\x1f"
_REST = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
UNSAFE = _C0 + _REST  # a regex character class body
_UNSAFE = re.compile(f"[{UNSAFE}]")
_UNSAFE_IN_JSON = re.compile(f"[{_REST}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _json_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str) -> str:
    """``text`` with every terminal control, bidi control and line separator written as ``\\xNN``/``\\uNNNN``."""
    # str.isprintable is False for every character of UNSAFE (Cc, Cf, Zl, Zp): True means nothing to do,
    # at half the cost of the regex search; False (an emoji with a ZWJ, a soft hyphen) asks the regex
    if text.isprintable() or _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escaped, text)


def is_printable(text: str) -> bool:
    """Whether ``printable(text)`` would return ``text`` unchanged."""
    return text.isprintable() or _UNSAFE.search(text) is None


def printable_lines(lines: Iterable[str]) -> str:
    """Lines made printable, each ended by a newline: a report's last step before the terminal.

    One ``str.isprintable`` per line when nothing needs escaping (a million-line
    table costs about 0.2 s, against 4 s to format it); ``printable`` line by line otherwise.
    """
    lines = list(lines)
    if all(map(str.isprintable, lines)):  # (a newline inside a line is not printable either)
        return "\n".join(lines) + "\n" if lines else ""
    return "".join(printable(line) + "\n" for line in lines)


def json_safe(text: str) -> str:
    """Serialised JSON with DEL, C1, bidi and separator characters as ``\\uNNNN`` escapes.

    JSON encoders escape U+0000-U+001F but write the rest raw; escaped, the
    document parses to exactly the same strings and prints safely on a terminal.
    Only valid on serialised JSON: outside strings these characters cannot occur.
    """
    if _UNSAFE_IN_JSON.search(text) is None:
        return text
    return _UNSAFE_IN_JSON.sub(_json_escaped, text)


def csv_for(text: str, for_terminal: bool) -> str:
    """CSV as written: exact for a file or a pipe; on a terminal every field escaped, as tables are.

    Escaping the text line by line escapes each field's characters the same way (a quoted field's own
    line break included, which then no longer breaks the line)."""
    if not for_terminal or not text:
        return text
    return printable_lines(text.rstrip("\n").split("\n"))


def markdown_text(text: str) -> str:
    """Trace text for a Markdown table cell outside code spans: printable, with pipes escaped (the table
    stays a table) and angle brackets as entities (GitHub would drop `<CUDAFunctor_add>` as an HTML tag)."""
    return printable(str(text)).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
