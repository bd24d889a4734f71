"""The members of a trace's top-level object, found by its structure: where the events array is, the keys
around it, and which of them the file repeats (a repeated key reads as JSON readers read it, the last one)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import orjson

from kerneltui.trace import repair
from kerneltui.trace.meta import TOP_KEYS_READ

_WS = b" \t\r\n"
EVENTS_KEY = "traceEvents"
# A string (complete when group 1 matched: its closing quote) or a bracket: the structure of JSON
# text, enough to tell a top-level key from one nested in a value or written inside a string.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(")?|[\[\]{}]', re.DOTALL)
BLANK = re.compile(rb"[ \t\r\n]*")


class TopLevel:
    """The members of a trace's top-level object, read by its structure alone (strings, their escapes,
    brackets), so a key nested in another value or written inside a string is never taken for one and
    damage elsewhere hides none. One regex match per token; ``members`` reads on from where its last
    call stopped, so a text passed again as it grows is walked once."""

    def __init__(self, depth: int = 0):
        self.at = 0  # where the next call starts reading
        self.depth = depth  # brackets open there: 0 before the object's "{", 1 inside it
        self.closed = False  # the object has ended

    def members(self, text: bytes) -> Iterator[tuple[str, int]]:
        """(key, index of its value) of each member whose value starts within ``text``, in file order."""
        end, depth = len(text), self.depth
        for token in _TOKEN.finditer(text, self.at):
            start = token.start()
            if text[start] == 0x22:  # '"'
                if token.group(1) is None:
                    break  # the text ends inside this string
                if depth != 1:
                    continue
                colon = BLANK.match(text, token.end()).end()
                value = BLANK.match(text, colon + 1).end() if colon < end and text[colon] == 0x3A else -1
                if colon == end or value == end:
                    break  # a key, maybe, whose value is not read yet
                if value > 0:  # a key (a string value is followed by "," or "}")
                    self.at, self.depth = value, depth
                    yield key_text(token.group()), value
            elif text[start] in b"[{":
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    self.closed = True
                    return
        else:
            self.at, self.depth = end, depth
            return
        self.at, self.depth = start, depth  # read that token again once there is more text


def top_level_members(text: bytes, depth: int = 0) -> list[tuple[str, int]]:
    """(key, index of its value) of each member of the top-level object in ``text``, which starts
    before the object's "{" (``depth`` 0) or inside it (``depth`` 1)."""
    return list(TopLevel(depth).members(text))


def key_text(token: bytes) -> str:
    """A key as JSON readers read it: ``"trace\\u0045vents"`` is traceEvents too."""
    if b"\\" not in token:
        return token[1:-1].decode("utf-8", "replace")
    try:
        return orjson.loads(repair.escape_lone_surrogates(token) or token)
    except orjson.JSONDecodeError:
        return token[1:-1].decode("utf-8", "replace")


def keys_after_events(tail: bytes) -> list[str]:
    """The top-level keys after the events array (``tail`` starts inside the top-level object)."""
    return [key for key, _ in top_level_members(tail, 1)]


def repeated_keys(keys: list[str]) -> tuple[str, ...]:
    """The keys kerneltui reads that appear more than once, in order of first appearance."""
    counts = Counter(keys)
    return tuple(key for key, n in counts.items() if n > 1 and key in TOP_KEYS_READ)


_EVENTS_KEY_TEXT = b'"traceEvents"'


def repeated_in_whole(data: bytes) -> tuple[str, ...]:
    """Repeated top-level keys of a file decoded whole, looked for only where "traceEvents" is
    written as a key twice (a find, not a walk: walking a whole file costs about what decoding it
    does). orjson keeps the last of each anyway, as JSON readers do."""
    at, seen = 0, 0
    while seen < 2:
        at = data.find(_EVENTS_KEY_TEXT, at)
        if at < 0:
            return ()
        at += len(_EVENTS_KEY_TEXT)
        colon = BLANK.match(data, at).end()
        seen += data[colon : colon + 1] == b":"
    return repeated_keys([key for key, _ in top_level_members(data)])


def parse_top(header: bytes, tail: bytes) -> tuple[dict, bool]:
    """The top-level keys besides traceEvents, and whether the file's end is whole."""
    header = repair.escape_lone_surrogates(header) or header
    tail = repair.escape_lone_surrogates(tail) or tail
    if not header.strip(_WS) or header.strip(_WS) == b"[":
        whole = not header.strip(_WS) or tail.strip(_WS) == b""
        return {}, whole
    for closing, whole in ((b"[]" + tail, True), (b"[]}", False)):
        try:
            top = orjson.loads(header + closing)
        except (orjson.JSONDecodeError, RecursionError):
            continue
        if isinstance(top, dict):
            top.pop("traceEvents", None)
            return top, whole
    return {}, False
