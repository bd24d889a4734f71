"""Terminal safety of every output, on a real pseudo-terminal.

Hostile traces (ESC, OSC 52 clipboard writes, OSC 0 title sets, CSI, C1, bidi overrides, CR, NUL in
every name, the device, the thread, the file names) go through every command and format the parser
offers (found from the parser, so a format added later is fed too), the errors, the cache listing,
and the three full screens with their clipboard, exports and panels. Whatever reaches the terminal
must hold none of the trace's control sequences: text outputs hold no control character at all;
a screen's stream holds Textual's own sequences only, and its clipboard writes (OSC 52) carry
escaped text.
"""

from __future__ import annotations

import base64
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import tty

import orjson
import pytest

from kerneltui.cli import build_parser
from tests.conftest import ROOT, cache_env
from tests.unit.test_terminal_text import UNSAFE, hostile_doc

HOSTILE_NAME = "h\x1b]0;t\x07\u202e.json"  # the file name itself is hostile
# the trace's sequences, as the trace holds them: none may reach the terminal raw
RAW = ("\x1b]52;c;cHduZWQ", "\x1b]0;title", "\x1b]0;t\x07", "\x1b[31mRED", "\x1b[2J[bold]", "\x1b[5mH200",
       "\x1b]8;;http://x", "\x9b", "\u202e", "\x1b[1m_0", "\x1b]52;BBBB", "\x00")
OSC52 = re.compile(rb"\x1b\]52;c;([A-Za-z0-9+/=]*)(?:\x07|\x1b\\)")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    doc = hostile_doc()
    (root / HOSTILE_NAME).write_bytes(orjson.dumps(doc))
    (root / "b.json").write_bytes(orjson.dumps(doc))
    for side in ("job", "job2"):
        (root / side).mkdir()
        for r in (0, 1):
            ranked = dict(doc, distributedInfo={"rank": r, "world_size": 2, "backend": "nccl\x1b[31m"})
            (root / side / f"rank\x1b[2J{r}.json").write_bytes(orjson.dumps(ranked))
    return root


def _pty_run(args: list[str], cwd, keys: list[bytes] = (), wait: float = 0, timeout: float = 60,
             raw: bool = True) -> tuple[int, bytes]:
    """The command with a pty as stdin, stdout and stderr (80x24); ``keys`` typed ``wait`` s apart."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    if raw:
        tty.setraw(child)  # the bytes read back are the bytes written (no CRLF translation)
    env = {"TERM": "xterm-256color", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    proc = subprocess.Popen([sys.executable, "-m", "kerneltui", *args], stdin=child, stdout=child, stderr=child,
                            env=env, cwd=cwd, close_fds=True, start_new_session=True)
    os.close(child)
    out = bytearray()
    pending = list(keys)
    deadline = time.monotonic() + timeout
    next_key = time.monotonic() + wait
    while time.monotonic() < deadline:
        if pending and time.monotonic() >= next_key:
            os.write(main, pending.pop(0))
            next_key = time.monotonic() + max(wait / 4, 0.8)
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None and not pending:
            break
    if proc.poll() is None:
        proc.kill()
    status = proc.wait(timeout=10)
    os.close(main)
    return status, bytes(out)


def _text_commands(hostile) -> list[list[str]]:
    """Every format of every subcommand that prints, on a trace, a pair and a job; and the error paths."""
    trace, other, job, job2 = (str(hostile / n) for n in (HOSTILE_NAME, "b.json", "job", "job2"))
    formats = {}
    parser = build_parser()
    for action in parser._subparsers._group_actions[0].choices.items():
        name, sub = action
        for a in sub._actions:
            if a.dest == "format" and a.choices:
                formats[name] = list(a.choices)
    commands = []
    for fmt in formats["summary"]:
        commands += [["summary", "--format", fmt, trace], ["summary", "--format", fmt, "--by", "module", trace],
                     ["summary", "--format", fmt, "--health", trace], ["summary", "--format", fmt, job],
                     ["summary", "--format", fmt, "--health", job]]
        if fmt != "markdown":
            commands.append(["summary", "--format", fmt, "--launches", trace])
    for fmt in formats["diff"]:
        commands += [["diff", "--format", fmt, trace, other], ["diff", "--format", fmt, job, job2]]
    commands += [["diff", "--fail-if-slower", "5", trace, other], ["cache"],
                 ["summary", str(hostile / "missing\x1b]0;x\x07.json")], ["open", str(hostile / "gone\x9b2J.json")],
                 ["diff", trace, str(hostile / "nope\u202e.json")]]
    return commands


def test_every_text_output_writes_no_control_character(hostile):
    commands = _text_commands(hostile)
    assert len(commands) >= 30
    for command in commands:
        status, out = _pty_run(command, cwd=hostile)
        text = out.decode("utf-8", "replace")
        assert status in (0, 1, 2, 3, 4), (command, status, text[-500:])
        leaked = [s for s in RAW if s in text]
        assert leaked == [], (command, leaked)
        assert [c for c in set(text.replace("\n", "")) if c in UNSAFE] == [], (command, text[:300])
        assert text.strip(), command  # something was said


def _inert_stream(out: bytes) -> str:
    """A screen's byte stream: its clipboard writes decoded and checked, then no trace sequence anywhere."""
    copied = [base64.b64decode(m.group(1)).decode() for m in OSC52.finditer(out)]
    for text in copied:
        assert [c for c in set(text.replace("\n", "")) if c in UNSAFE] == [], text
    stream = OSC52.sub(b"", out).decode("utf-8", "replace")
    leaked = [s for s in RAW if s in stream]
    assert leaked == [], leaked
    return "\n".join(copied)


def test_the_browser_its_clipboard_exports_and_report(hostile, tmp_path):
    status, out = _pty_run(["open", str(hostile / HOSTILE_NAME)], cwd=tmp_path,
                           keys=[b"y", b"X", b"x", b"H", b"\x1b", b"q"], wait=6, raw=False)
    assert status == 0
    copied = _inert_stream(out)
    assert r"evil\x1b]52;c;cHduZWQ=\x07" in copied  # the kernel's name, escaped as on screen
    exports = sorted(p.name for p in tmp_path.iterdir())
    assert [n.rsplit(".", 1)[1] for n in exports] == ["csv", "md"]
    markdown = next(p for p in tmp_path.iterdir() if p.suffix == ".md").read_text()
    assert [c for c in set(markdown.replace("\n", "")) if c in UNSAFE] == []
    # CSV is exact, for scripts (summary --format csv to a file is too): never written to the terminal


def test_the_diff_screen_and_its_clipboard(hostile, tmp_path):
    status, out = _pty_run(["diff", str(hostile / HOSTILE_NAME), str(hostile / "b.json")], cwd=tmp_path,
                           keys=[b"y", b"H", b"\x1b", b"i", b"\x1b", b"q"], wait=8, raw=False)
    assert status == 0
    copied = _inert_stream(out)
    assert copied.startswith("A: ")


def test_the_ranks_screen(hostile, tmp_path):
    status, out = _pty_run(["open", str(hostile / "job")], cwd=tmp_path, keys=[b"i", b"\x1b", b"q"], wait=8,
                           raw=False)
    assert status == 0
    _inert_stream(out)
