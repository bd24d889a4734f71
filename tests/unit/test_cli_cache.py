"""The CLI and the column cache: `kerneltui cache [--clear]`, and --no-cache on summary, diff and open."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

from kerneltui import cli
from kerneltui.trace import cache
from tests.conftest import PROJECT_TRACES, ROOT, cache_env

A = str(PROJECT_TRACES / "add_relu_1M_eager.json.gz")
B = str(PROJECT_TRACES / "add_relu_1M_compiled.json.gz")


def kerneltui(*args: str, **env: str) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env(), **env}
    return subprocess.run([sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def on_a_terminal(monkeypatch, command: str) -> None:
    """As run from a terminal: where stdin or stdout is none, the screen commands print their report instead."""
    import importlib

    monkeypatch.setattr(importlib.import_module(f"kerneltui.commands.{command}"), "interactive", lambda: True,
                        raising=False)


def test_cache_shows_the_directory_entries_and_size(private_cache):
    empty = kerneltui("cache")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.splitlines() == [
        f"directory  {private_cache}",
        "entries    0",
        "size       0 B of at most 10.0 GB (KERNELTUI_CACHE_MAX)",
    ]
    assert kerneltui("summary", A).returncode == 0
    assert kerneltui("diff", A, B, "--format", "json").returncode == 0
    full = kerneltui("cache", KERNELTUI_CACHE_MAX="1G")
    lines = full.stdout.splitlines()
    assert lines[1:3] == ["entries    2", "reports    1 (summaries kept whole: a summary asked again is answered from them)"]
    size = sum(p.stat().st_size for p in [*private_cache.glob("*.arrow"), *private_cache.glob("*.report")])
    assert lines[3] == f"size       {size / 1e3:.1f} KB of at most 1.0 GB (KERNELTUI_CACHE_MAX)"


def test_cache_says_when_it_is_off(private_cache):
    out = kerneltui("cache", KERNELTUI_CACHE="0")
    assert out.stdout.splitlines()[0] == f"directory  {private_cache}  (off: KERNELTUI_CACHE=0)"


def test_cache_clear_empties_it(private_cache):
    kerneltui("diff", A, B, "--format", "json")
    size = sum(p.stat().st_size for p in private_cache.glob("*.arrow"))
    cleared = kerneltui("cache", "--clear")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout == f"removed 2 entries ({size / 1e3:.1f} KB) from {private_cache}\n"
    assert list(private_cache.glob("*.arrow")) == []
    assert kerneltui("cache", "--clear").stdout == f"removed 0 entries (0 B) from {private_cache}\n"


def test_cache_clear_without_a_directory():
    out = kerneltui("cache", "--clear")
    assert out.returncode == 0 and out.stdout.startswith("removed 0 entries")


@pytest.mark.parametrize("argv", [["summary", A, "--format", "json"], ["diff", A, B, "--format", "json"]],
                         ids=["summary", "diff"])
def test_no_cache_writes_and_reads_nothing(argv, private_cache, monkeypatch, capsys):
    assert cli.main([*argv, "--no-cache"]) == 0
    no_flag = capsys.readouterr().out
    assert not private_cache.exists()
    assert cli.main(argv) == 0  # with the cache: the same output, and entries written
    assert capsys.readouterr().out == no_flag and list(private_cache.glob("*.arrow"))

    def refuse(*args, **kwargs):
        raise AssertionError("read the cache")

    monkeypatch.setattr(cache, "read_entry", refuse)
    assert cli.main([*argv, "--no-cache"]) == 0
    assert capsys.readouterr().out == no_flag


def test_open_no_cache_hands_the_app_a_loader_without_cache(monkeypatch):
    import kerneltui.tui.app as app_module
    from kerneltui.commands.load_ahead import load_trace

    seen = []

    class Done(Exception):
        pass

    def fake_build_app(path, loader, kept=None):
        seen.append(loader)
        kepts.append(kept)
        raise Done

    kepts = []
    monkeypatch.setattr(app_module, "build_app", fake_build_app)
    monkeypatch.setattr("kerneltui.commands.kept_screen.terminal_size", lambda: (120, 40))
    on_a_terminal(monkeypatch, "open")
    for argv in (["open", A, "--no-cache"], ["open", A]):
        with pytest.raises(Done):
            cli.main(argv)
    for ahead in seen:  # the read started at once (commands/load_ahead.py): let it end within this test
        assert ahead._done.wait(60)
    without, with_cache = (ahead.loader for ahead in seen)
    assert isinstance(without, functools.partial) and without.func is load_trace
    assert without.keywords == {"cache": False, "write_later": True}
    assert with_cache.func is load_trace and with_cache.keywords == {"cache": None, "write_later": True}
    assert kepts[0].where is None and kepts[1].where is not None  # no first screen kept with --no-cache either


def test_diff_screen_no_cache_hands_the_app_a_loader_without_cache(monkeypatch):
    from kerneltui.trace.model import load_trace
    import kerneltui.tui.diff.app as diff_app

    seen = []

    class Done(Exception):
        pass

    def fake_build_app(a, b, loader, provenance=None):
        seen.append(loader)
        raise Done

    monkeypatch.setattr(diff_app, "build_app", fake_build_app)
    on_a_terminal(monkeypatch, "diff")
    for argv in (["diff", A, B, "--no-cache"], ["diff", A, B]):
        with pytest.raises(Done):
            cli.main(argv)
    without, with_cache = seen
    assert isinstance(without, functools.partial) and without.keywords == {"cache": False, "write_later": True}
    assert with_cache.func is load_trace and with_cache.keywords == {"cache": None, "write_later": True}


def test_no_cache_loader_really_skips_the_cache(private_cache):
    from kerneltui.trace.model import load_trace

    functools.partial(load_trace, cache=False)(A, progress=None)
    assert not private_cache.exists()
