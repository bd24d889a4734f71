"""`open`'s kept first screen (commands/kept_screen.py, tui/screens/kept_frame.py).

The first open keeps the browser's first draw; the next shows it before any heavy import,
then the app shows the same lines until the browser is ready, and the keys typed meanwhile
reach the browser.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import termios
import threading
import time

import pytest

from kerneltui.commands import kept_screen
from kerneltui.commands.kept_screen import FirstScreen
from kerneltui.errors import TraceError
from kerneltui.trace import load_trace
from kerneltui.tui import app as app_module
from kerneltui.tui.app import build_app
from kerneltui.tui.messages import AnalysesReady, BrowseReady, KernelsReady
from kerneltui.tui.model import build_analyses, build_browse, build_kernels
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.screens.kept_frame import KeptFrame, KeptFrameScreen
from kerneltui.tui.screens.loading import LoadingScreen
from tests.conftest import PROJECT_TRACES, ROOT, cache_env
from tests.tui.helpers import screen_text, settle

EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
SIZE = (120, 40)
SGR = re.compile(r"\x1b\[[0-9;]*m")


def plain(lines: list[str]) -> list[str]:
    return [SGR.sub("", line) for line in lines]


def held_loader(release: threading.Event, progress_at: float | None = None):
    """A loader that waits for ``release`` (the app meanwhile shows what it shows before the trace),
    reporting ``progress_at`` first if given, then loads the trace."""

    def loader(path, progress):
        if progress_at is not None:
            progress(progress_at)
        release.wait(20)
        return load_trace(path)

    return loader


async def first_open(path=EAGER, size=SIZE) -> tuple[list[str], list[str]]:
    """Open ``path`` with nothing kept: (the lines it kept, what the browser showed once settled)."""
    where = kept_screen.kept_for(str(path), size)
    app = build_app(str(path), kept=FirstScreen(where, None, size))
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)
        settled = [strip.text for strip in app.screen._compositor.render_strips()]
    return kept_screen.read(where), settled


def both_stages_at_once(app, trace) -> None:
    """post_stages, but stages 2 and 3 are posted right behind stage 1: before the browser's first draw."""
    kernels = build_kernels(trace)
    browse = build_browse(kernels)
    analyses = build_analyses(trace)
    app.post_message(KernelsReady(kernels))
    app.post_message(BrowseReady(browse))
    app.post_message(AnalysesReady(analyses, trace))


@pytest.mark.parametrize("stages", ["as loaded", "at once"])
async def test_the_first_open_keeps_the_browsers_first_draw_before_stage_two(monkeypatch, stages):
    if stages == "at once":
        monkeypatch.setattr(app_module, "post_stages", both_stages_at_once)
    lines, settled = await first_open()
    text = plain(lines)
    assert len(text) == SIZE[1] and all(len(line) == SIZE[0] for line in text)
    assert text[0].startswith(" add_relu_1M_eager.json.gz · 2 launches · 2 kernels · … · NVIDIA H200")
    assert text[2].split() == ["Kernel", "Count", "Total▼", "Mean", "Share", "Launched", "by"]
    assert text[3].split() == ["vectorized_elementwise_kernel<CUDAFunctor_add>[f32]", "1", "2.27µs", "2.27µs",
                               "53.4%", "aten::add"]
    assert any("drawing the timeline…" in line for line in text)  # stage 1's, always: stage 2 waited
    assert "busy 4.26µs of 2.49ms" in settled[0]  # ...and came after
    assert all(line.endswith("\x1b[0m") or "\x1b" not in line for line in lines)


async def test_a_kept_screen_is_shown_as_it_was_until_the_browser_and_keys_typed_meanwhile_reach_it():
    lines, _ = await first_open()
    release = threading.Event()
    slow_loader = held_loader(release)

    where = kept_screen.kept_for(str(EAGER), SIZE)
    app = build_app(str(EAGER), slow_loader, kept=FirstScreen(where, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, KeptFrameScreen)
        assert screen_text(app.screen.query_one(KeptFrame)) == plain(lines)
        await pilot.press("question_mark")  # held, not lost
        assert isinstance(app.screen, KeptFrameScreen)
        release.set()
        await settle(app, pilot)
        for _ in range(20):
            await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert isinstance(app.screen_stack[-2], BrowserScreen)


async def test_a_resize_or_a_load_error_under_a_kept_screen_shows_the_loading_screen(tmp_path):
    lines, _ = await first_open()
    release = threading.Event()
    slow_loader = held_loader(release)

    app = build_app(str(EAGER), slow_loader, kept=FirstScreen(None, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, KeptFrameScreen)
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert isinstance(app.screen, LoadingScreen)
        release.set()
        await settle(app, pilot)

    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not json")
    with pytest.raises(TraceError) as caught:
        load_trace(bad)
    app = build_app(str(bad), kept=FirstScreen(None, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.pause()
        assert isinstance(app.screen, LoadingScreen)
        assert str(app.screen.query_one("#loading-title").render()) == f"kerneltui: {caught.value}"
        await pilot.press("q")
    assert app.return_code == 2


async def test_keys_pressed_before_the_first_draw_mean_nothing_is_kept():
    where = kept_screen.kept_for(str(EAGER), SIZE)
    app = build_app(str(EAGER), kept=FirstScreen(where, None, SIZE))
    app.pending_keys.append(("question_mark", "?"))  # typed on the loading screen
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
    assert kept_screen.read(where) is None


def test_the_key_holds_the_size_the_file_and_no_cache(tmp_path):
    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["a", "b"])
    assert kept_screen.read(where) == ["a", "b"]
    assert kept_screen.read(kept_screen.kept_for(str(EAGER), (80, 24))) is None
    assert kept_screen.kept_for(str(EAGER), SIZE, no_cache=True) is None
    assert kept_screen.kept_for(str(EAGER), None) is None  # no terminal
    copy = tmp_path / "copy.json.gz"
    copy.write_bytes(EAGER.read_bytes())
    assert kept_screen.read(kept_screen.kept_for(str(copy), SIZE)) is None
    os.environ["KERNELTUI_CACHE"] = "0"
    try:
        assert kept_screen.kept_for(str(EAGER), SIZE) is None
    finally:
        del os.environ["KERNELTUI_CACHE"]


def test_a_damaged_or_planted_kept_screen_is_a_miss(tmp_path):
    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["a", "b", "c"])
    data = where.entry.read_bytes()
    where.entry.write_bytes(data[:-1])  # cut short
    assert kept_screen.read(where) is None
    head = json.loads(data.split(b"\n")[1])
    where.entry.write_bytes(data.replace(f'"rows": {head["rows"]}'.encode(), b'"rows": 2'))  # rows disagree
    assert kept_screen.read(where) is None
    where.entry.unlink()
    where.entry.symlink_to(EAGER)
    assert kept_screen.read(where) is None and where.entry.is_symlink()


def run_in_pty(script: str, env: dict | None = None) -> str:
    """``script`` run by a fresh Python with a terminal (120x40) on stdin, stdout and stderr: what it wrote."""
    main, child = pty.openpty()
    _set_size(child, *SIZE)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=child, stdout=child, stderr=child, cwd=ROOT,
                            env={**os.environ, **cache_env(), **(env or {})})
    os.close(child)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(10)
    os.close(main)
    return out.decode("utf-8", "replace")


def test_open_shows_the_kept_screen_before_importing_textual_or_pandas_and_puts_the_terminal_back():
    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["\x1b[1mfirst line\x1b[0m", "second"] + [""] * (SIZE[1] - 2))
    script = (
        "import argparse, sys, termios\n"
        "from kerneltui.commands import open as command\n"
        "before = termios.tcgetattr(0)\n"
        f"args = argparse.Namespace(trace=[{str(EAGER)!r}], no_cache=False)\n"
        "kept, put_back = command._kept_screen(args)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'pandas', 'numpy', 'pyarrow'))\n"
        "attrs = termios.tcgetattr(0)\n"
        "held = attrs[3] & (termios.ECHO | termios.ICANON) == 0 and attrs[0] & (termios.ICRNL | termios.IXON) == 0\n"
        "put_back(True)\n"
        "print('HEAVY', heavy, kept.lines is not None, held, termios.tcgetattr(0) == before, flush=True)\n"
    )
    text = run_in_pty(script)
    assert "\x1b[?1049h" in text and "\x1b[1;1H\x1b[1mfirst line\x1b[0m" in text and "\x1b[2;1Hsecond" in text
    # nothing heavy imported; keys held unechoed, Enter kept as \r and ctrl+q not taken as XON; the terminal put back
    assert "HEAVY [] True True True" in text
    assert text.index("\x1b[?1049l") < text.index("HEAVY")  # the normal screen is back before anything else


def test_a_terminal_that_cannot_take_the_kept_text_gets_the_normal_start_and_keeps_its_settings():
    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["a · b"] + [""] * (SIZE[1] - 1))  # "·" has no ASCII form
    script = (
        "import argparse, termios\n"
        "from kerneltui.commands import open as command\n"
        "before = termios.tcgetattr(0)\n"
        f"kept, put_back = command._kept_screen(argparse.Namespace(trace=[{str(EAGER)!r}], no_cache=False))\n"
        "print('SHOWN', kept.lines is not None, termios.tcgetattr(0) == before, flush=True)\n"
    )
    text = run_in_pty(script, {"PYTHONIOENCODING": "ascii"})
    assert "SHOWN False True" in text and "\x1b[?1049h" not in text


def test_put_back_leaves_the_alternate_screen_only_where_textual_never_took_the_terminal():
    script = (
        "from kerneltui.commands import kept_screen\n"
        "import sys\n"
        "put_back = kept_screen.show(['x'])\n"
        "print('|MARK|', flush=True)\n"
        "put_back(sys.argv[1] == 'never')\n"
        "put_back(True)\n"  # a second call does nothing
        "print('|END|', flush=True)\n"
    )
    for textual, leaves in (("took", 0), ("never", 1)):
        text = run_in_pty(script.replace("sys.argv[1]", repr(textual)))
        after = text[text.index("|MARK|"):text.index("|END|")]
        assert after.count("\x1b[?1049l") == leaves


def test_ctrl_c_between_the_kept_screen_and_textual_puts_the_terminal_back(monkeypatch):
    from kerneltui.cli import main
    from kerneltui.trace import cache

    calls = []
    monkeypatch.setattr("kerneltui.commands.open.interactive", lambda: True)
    monkeypatch.setattr("kerneltui.commands.open._kept_screen",
                        lambda args: (FirstScreen(None, ["x"], SIZE), calls.append))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "start_workers_for", interrupted)
    assert main(["open", str(EAGER)]) == 130
    assert calls == [True]  # the terminal put back, the alternate screen left: Textual never took it


def _set_size(fd, columns, rows):
    import fcntl
    import struct

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def test_kerneltui_cache_counts_the_kept_screens_and_clear_removes_them(capsys):
    from kerneltui.cli import main

    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["a"])
    assert main(["cache"]) == 0
    assert "screens    1 (first screens of `open`: shown at once when the trace is opened again)\n" in (
        capsys.readouterr().out)
    assert main(["cache", "--clear"]) == 0
    assert not where.entry.exists()


async def test_q_under_a_kept_screen_quits_at_once_unless_a_search_was_typed_before_it():
    lines, _ = await first_open()
    release = threading.Event()
    slow_loader = held_loader(release)

    app = build_app(str(EAGER), slow_loader, kept=FirstScreen(None, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", "q")  # a search for q: held for the browser's search box
        assert isinstance(app.screen, KeptFrameScreen) and app.pending_keys == [("slash", "/"), ("q", "q")]
        release.set()
        await settle(app, pilot)
        assert app.screen.query_one("#filter").value == "q"
    release.clear()
    app = build_app(str(EAGER), slow_loader, kept=FirstScreen(None, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        release.set()
    assert app.return_code == 0 and not app.loaded  # gone before the trace was loaded


async def test_a_cold_read_behind_a_kept_screen_shows_its_progress():
    lines, _ = await first_open()
    release = threading.Event()
    cold_loader = held_loader(release, progress_at=0.25)  # what a read of the JSON reports (the cache: only 1.0)

    app = build_app(str(EAGER), cold_loader, kept=FirstScreen(None, lines, SIZE))
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(10):
            await pilot.pause()
        assert isinstance(app.screen, LoadingScreen)
        release.set()
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen)


def test_writing_a_traces_columns_keeps_its_kept_screen_and_report(private_cache):
    """`open` writes the column entry after its first screen is kept (in the background, on a big
    trace well after): the column write drops older columns of the file, not its screens or reports."""
    where = kept_screen.kept_for(str(EAGER), SIZE)
    kept_screen.write(where, ["a"])
    report = where.entry.with_name(where.entry.name.split("-")[0] + "-" + "0" * 24 + ".report")
    report.write_bytes(b"kept")
    load_trace(EAGER)  # a miss: the columns are written now
    assert len(list(private_cache.glob("*.arrow"))) == 1
    assert kept_screen.read(where) == ["a"] and report.read_bytes() == b"kept"
