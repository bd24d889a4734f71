"""`open`'s first screen, kept: a trace opened again is on screen before Textual or pandas is imported.

Whatever the trace's size, the browser's first table waits for imports (Textual about 0.4 s,
pandas 0.35-0.7 s on a 2-core machine) and a load. So the first time a trace is opened at a
terminal size, the lines of the browser's first screen (its kernel table; the timeline still
drawing) are kept in the cache directory (commands/kept.py), keyed by the file's identity, the
code, the terminal's size and the variables that change how Textual draws. When it is opened
again, those lines are written to the terminal's alternate screen at once (a few tens of ms).
The terminal is put out of line mode without echo at the same moment, so keys typed now are
neither echoed over the picture nor lost: the app, started behind the picture, shows the same
lines (tui/screens/kept_frame.py) until the browser is ready, then replaces them with the
browser itself (the same picture, now live) and hands it the keys.

Not kept or shown: ``--no-cache``, ``KERNELTUI_CACHE=0``, a pipe, a rank directory.
Imports nothing heavy.
"""

from __future__ import annotations

import os
import sys
import termios
from collections.abc import Callable
from dataclasses import dataclass

from kerneltui.commands import kept as keep
from kerneltui.trace.cache_dir import SCREEN_SUFFIX

MAGIC = b"kerneltui-screen 1\n"
# What changes how Textual draws the same widgets: colours, the terminal's kind, Textual's own settings.
_DRAWING_VARIABLES = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TERM_PROGRAM")
_LEAVE = "\x1b[?1049l\x1b[?25h"  # the normal screen and the cursor back (a no-op where Textual already did)


@dataclass(frozen=True)
class FirstScreen:
    """What `open` hands the app: where its first screen is kept, the lines shown from there (None:
    nothing was kept, the app keeps what it draws), and the terminal size they are for."""

    where: keep.Kept | None
    lines: list[str] | None
    size: tuple[int, int] | None


def terminal_size() -> tuple[int, int] | None:
    """(columns, rows) of the terminal on stdout, None without one."""
    try:
        return tuple(os.get_terminal_size(sys.__stdout__.fileno()))
    except (OSError, AttributeError, ValueError):
        return None


def kept_for(path: str, size: tuple[int, int] | None, no_cache: bool = False) -> keep.Kept | None:
    """Where the first screen of ``path`` at the terminal size ``size`` is kept; None where it may not be."""
    if no_cache or size is None:
        return None
    columns, lines = size
    env = sorted((k, v) for k, v in os.environ.items() if k in _DRAWING_VARIABLES or k.startswith("TEXTUAL"))
    return keep.kept_for(path, SCREEN_SUFFIX, {"size": [columns, lines], "env": env, "textual": _textual()})


def read(where: keep.Kept) -> list[str] | None:
    """The kept lines (terminal text with colour codes), one per row of the screen; None on a miss."""
    found = keep.read(where, MAGIC)
    if found is None:
        return None
    head, body = found
    try:
        lines = body.decode("utf-8").split("\n")
        if len(lines) != int(head["rows"]):
            return None
    except (KeyError, TypeError, ValueError):
        return None
    return lines


def write(where: keep.Kept, lines: list[str]) -> None:
    """Keep ``lines`` (from the browser's first draw) for the next open. Never raises."""
    if any("\n" in line for line in lines):
        return
    keep.write(where, MAGIC, {"rows": len(lines)}, "\n".join(lines).encode("utf-8"))


def show(lines: list[str]) -> Callable[[bool], None] | None:
    """Draw ``lines`` on the terminal's alternate screen now, keys typed from then on held unechoed
    for the app; returns what puts the terminal back (call it once, when the app is gone: with
    True where Textual never took the terminal, so the alternate screen is left here too), or None,
    and nothing changed, where the lines cannot be written (a stdout that cannot encode them)."""
    out = sys.__stdout__
    frame = "\x1b[?1049h\x1b[?25l" + "".join(f"\x1b[{y};1H{line}\x1b[0m" for y, line in enumerate(lines, 1))
    try:
        encoded = frame.encode(out.encoding or "utf-8")
    except (LookupError, UnicodeError, AttributeError):
        return None
    try:
        out.flush()
        out.buffer.write(encoded)
        out.flush()
    except (OSError, ValueError, AttributeError):
        _write(out, _LEAVE)
        return None
    restore = _hold_keys(sys.__stdin__)
    done = []

    def put_back(leave_screen: bool) -> None:
        if done:
            return
        done.append(True)
        restore()
        if leave_screen:  # once Textual has left it, a second leave would move the cursor back up
            _write(out, _LEAVE)

    return put_back


def _write(out, text: str) -> None:
    try:
        out.write(text)
        out.flush()
    except (OSError, ValueError):
        pass


def _hold_keys(stream) -> Callable[[], None]:
    """The terminal as Textual will set it, from now: no echo, no line mode, no input translation
    (Enter stays \\r, ctrl+q and ctrl+s reach the app), signals kept (ctrl+c still stops it); the undo."""
    try:
        fd = stream.fileno()
        before = termios.tcgetattr(fd)
        held = termios.tcgetattr(fd)
        held[0] &= ~(termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR)
        held[3] &= ~(termios.ECHO | termios.ICANON)
        held[6][termios.VMIN], held[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, held)
    except (termios.error, OSError, AttributeError, ValueError):
        return lambda: None

    def restore() -> None:
        try:
            termios.tcsetattr(fd, termios.TCSANOW, before)
        except (termios.error, OSError):
            pass

    return restore


def _textual() -> str:
    """Textual's version, without importing it (an upgrade may draw the same widgets differently)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("textual")
    except PackageNotFoundError:
        return ""
