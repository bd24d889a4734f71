"""The column cache and what other users control: their directories, their files, links, FIFOs and pipes.

A planted entry could show any numbers, so the cache trusts only this user's own files in a directory
only this user may change; anything else costs speed (one line on stderr says why), never the output.
"Another user's" is uid 65534 (nobody): these tests chown, so they need root, and skip without it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kerneltui import cli
from kerneltui.trace import cache
from kerneltui.trace.cache import start_workers_for
from kerneltui.trace.load import read_trace
from kerneltui.trace.model import load_trace
from kerneltui.trace.schema import KernelColumns
from tests.conftest import PROJECT_TRACES, ROOT, cache_env

SMALL = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
NOBODY = 65534
OLD = (1_000_000, 1_000_000)  # an mtime long past: a temporary file the sweep would take


@pytest.fixture(autouse=True)
def untold(monkeypatch):
    """Every test starts as a fresh process would: no reason told yet."""
    monkeypatch.setattr(cache, "_told", set())


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def kerneltui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    return subprocess.run([sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout, stdin=subprocess.DEVNULL)


def give_away(path: Path) -> None:
    """``path`` (not what a link leads to) made another user's."""
    try:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    except PermissionError:
        pytest.skip("making a file another user's takes root (chown)")


def entry_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def plant(directory: Path) -> Path:
    """An entry for SMALL that holds only its first event: what another user could leave to be served."""
    raw, meta = read_trace(SMALL)
    raw.columns = {name: column[:1].copy() for name, column in raw.columns.items()}
    first = raw.kernel_fields["row"] < 1  # the kernels' side table of that event alone
    raw.kernel_fields = KernelColumns({name: column[first] for name, column in raw.kernel_fields.columns.items()})
    key = cache.entry_key(SMALL)
    where = cache.entry_path(key, directory)
    assert cache.write_entry(where, key, raw, meta)
    assert len(cache.read_entry(where, key)[0].columns["ts"]) == 1
    return where


def uncached_summary(capsys) -> str:
    rc, out, err = run_cli(capsys, "summary", str(SMALL), "--format", "json", "--no-cache")
    assert rc == 0 and not err
    return out


def assert_not_used(capsys, directory: Path, why: str) -> None:
    """The summary is the uncached one, with the same status; one line on stderr names the directory and why."""
    expected = uncached_summary(capsys)
    rc, out, err = run_cli(capsys, "summary", str(SMALL), "--format", "json")
    assert rc == 0 and out == expected
    assert err == f"kerneltui: cache not used: {directory} {why}\n"


# -- the directory -----------------------------------------------------------------------------------------
def test_a_planted_entry_in_another_users_directory_is_never_served(private_cache, capsys):
    where = plant(private_cache)
    private_cache.chmod(0o777)
    give_away(private_cache)
    give_away(where)
    assert_not_used(capsys, private_cache, f"is owned by another user (uid {NOBODY})")
    assert entry_names(private_cache) == [where.name]  # nothing of this user's written there, nothing removed
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o777  # not ours to chmod


def test_a_cache_directory_owned_by_another_user_is_not_used_even_if_private(private_cache, capsys):
    private_cache.mkdir(mode=0o700)
    give_away(private_cache)
    assert_not_used(capsys, private_cache, f"is owned by another user (uid {NOBODY})")
    assert entry_names(private_cache) == []


def test_a_shared_cache_home_owned_by_another_user_is_not_used(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    give_away(shared)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert_not_used(capsys, shared, f"is owned by another user (uid {NOBODY})")
    assert entry_names(shared) == []  # not even the kerneltui directory made there


def test_a_cache_home_writable_by_others_is_not_used(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # this user's, but anyone may swap the kerneltui directory in it for theirs
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert_not_used(capsys, shared, "is writable by others")
    assert entry_names(shared) == []


def test_a_sticky_cache_home_like_tmp_is_fine(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # no one renames what is not theirs there
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    rc, _, err = run_cli(capsys, "summary", str(SMALL))
    assert rc == 0 and not err
    assert stat.S_IMODE((shared / "kerneltui").stat().st_mode) == 0o700
    assert len(list((shared / "kerneltui").glob("*.arrow"))) == 1


def test_missing_directories_are_created_private(tmp_path, monkeypatch):
    base = tmp_path / "a" / "b"
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    load_trace(SMALL)
    for p in (tmp_path / "a", base, base / "kerneltui"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    assert cache.stats().entries == 1


def test_a_directory_open_to_others_that_cannot_be_made_private_is_not_used(private_cache, monkeypatch, capsys):
    private_cache.mkdir()
    private_cache.chmod(0o777)

    def refused(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(cache.os, "fchmod", refused)
    assert_not_used(capsys, private_cache, "is writable by others and could not be made private (Operation not permitted)")
    assert entry_names(private_cache) == []


def test_a_symlinked_cache_directory_is_not_followed(private_cache, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    theirs = elsewhere / "results.arrow"
    theirs.write_bytes(b"someone's data")
    stale = elsewhere / (cache.TEMP_PREFIX + "keep" + cache.SUFFIX)
    stale.write_bytes(b"half")
    os.utime(stale, OLD)
    private_cache.symlink_to(elsewhere)
    assert_not_used(capsys, private_cache, "is a symbolic link")
    assert entry_names(elsewhere) == sorted([theirs.name, stale.name])  # nothing written, nothing swept
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755  # not chmod'ed
    cleared = kerneltui("cache", "--clear")
    assert cleared.returncode != 0 and cleared.stdout == ""
    assert cleared.stderr == f"kerneltui: cache not cleared: {private_cache} is a symbolic link\n"
    assert entry_names(elsewhere) == sorted([theirs.name, stale.name])
    shown = kerneltui("cache")
    assert shown.returncode == 0 and shown.stderr == f"kerneltui: cache not used: {private_cache} is a symbolic link\n"


def test_clear_refuses_another_users_directory(private_cache):
    where = plant(private_cache)
    give_away(where)
    give_away(private_cache)
    cleared = kerneltui("cache", "--clear")
    assert cleared.returncode != 0
    assert cleared.stderr == f"kerneltui: cache not cleared: {private_cache} is owned by another user (uid {NOBODY})\n"
    assert where.exists()


def test_the_reason_is_told_once_a_process(private_cache, capsys):
    private_cache.symlink_to(private_cache.parent)
    a, b = str(SMALL), str(PROJECT_TRACES / "add_relu_1M_compiled.json.gz")
    rc, _, err = run_cli(capsys, "diff", a, b, "--format", "json")
    assert rc == 0 and err == f"kerneltui: cache not used: {private_cache} is a symbolic link\n"


# -- entries -------------------------------------------------------------------------------------------------
def test_an_entry_of_another_users_is_a_miss_and_left_alone(private_cache, capsys):
    where = plant(private_cache)
    where.chmod(0o644)
    give_away(where)
    rc, out, err = run_cli(capsys, "summary", str(SMALL), "--format", "json")
    assert rc == 0 and not err and out == uncached_summary(capsys)
    assert where.exists() and where.stat().st_uid == NOBODY  # neither removed nor replaced
    assert not cache.holds(SMALL)


def test_a_symlinked_entry_is_a_miss_and_left_alone(private_cache, tmp_path, capsys):
    outside = plant(tmp_path)  # this user's own file, but reached through a link
    load_trace(SMALL)
    (where,) = private_cache.glob("*.arrow")
    where.unlink()
    where.symlink_to(outside)
    assert not cache.holds(SMALL)
    rc, out, err = run_cli(capsys, "summary", str(SMALL), "--format", "json")
    assert rc == 0 and not err and out == uncached_summary(capsys)
    assert where.is_symlink() and outside.exists()


def test_a_fifo_in_place_of_an_entry_does_not_block(private_cache):
    load_trace(SMALL)
    (where,) = private_cache.glob("*.arrow")
    where.unlink()
    os.mkfifo(where, 0o600)
    expected = kerneltui("summary", str(SMALL), "--no-cache")
    out = kerneltui("summary", str(SMALL), timeout=30)  # before: blocked for ever in open()
    assert out.returncode == 0 and out.stdout == expected.stdout and out.stderr == ""
    assert stat.S_ISFIFO(os.lstat(where).st_mode)  # not ours to remove
    assert kerneltui("cache").stdout.splitlines()[1:3] == ["entries    0", ("reports    1 (summaries kept whole: a summary"
                                                                          " asked again is answered from them)")]


# -- the sweeps ------------------------------------------------------------------------------------------------
def test_the_sweeps_remove_only_kerneltuis_own_files(private_cache, tmp_path):
    load_trace(SMALL)
    (entry,) = private_cache.glob("*.arrow")
    outside = tmp_path / "outside.arrow"
    outside.write_bytes(b"not the cache's")
    os.utime(outside, OLD)
    kept = {
        "notes.arrow": lambda p: p.write_bytes(b"a file of the user's, not an entry"),
        "0123456789abcdef-0123456789abcdef01234567.arrow": lambda p: p.symlink_to(outside),
        "fedcba9876543210-fedcba9876543210fedcba98.arrow": lambda p: (p.write_bytes(b"x"), give_away(p)),
        cache.TEMP_PREFIX + "link" + cache.SUFFIX: lambda p: p.symlink_to(outside),
        cache.TEMP_PREFIX + "fifo" + cache.SUFFIX: lambda p: os.mkfifo(p),
        cache.TEMP_PREFIX + "theirs" + cache.SUFFIX: lambda p: (p.write_bytes(b"x"), give_away(p)),
        cache.TEMP_PREFIX + "notes.txt": lambda p: p.write_bytes(b"x"),
    }
    for name, make in kept.items():
        make(private_cache / name)
        os.utime(private_cache / name, OLD, follow_symlinks=False)
    dead = private_cache / (cache.TEMP_PREFIX + "dead" + cache.SUFFIX)
    dead.write_bytes(b"half an entry")
    os.utime(dead, OLD)

    assert cache.write_entry(entry, cache.entry_key(SMALL), *read_trace(SMALL))  # sweeps stale temporary files
    assert entry_names(private_cache) == sorted([*kept, entry.name])
    assert cache.stats().entries == 1
    cleared = kerneltui("cache", "--clear")
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed 1 entry ")
    assert entry_names(private_cache) == sorted(kept)
    assert outside.read_bytes() == b"not the cache's"


# -- traces the cache used to fail on ------------------------------------------------------------------------
def test_a_trace_without_events_is_cached_and_read_back_quietly(tmp_path, capsys, monkeypatch, private_cache):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": []}))
    cold = run_cli(capsys, "summary", str(empty), "--format", "json")
    assert cold[0] == 0 and not cold[2]
    assert cache.holds(empty)

    def refuse(*args, **kwargs):
        raise AssertionError("read the trace instead of the cache")

    monkeypatch.setattr(cache, "read_trace", refuse)
    assert run_cli(capsys, "summary", str(empty), "--format", "json") == cold  # before: a warning every time
    raw, _ = cache.load(empty)
    assert all(len(column) == 0 for column in raw.columns.values())


def feed_fifo(path: Path, data: bytes) -> threading.Thread:
    def write():
        with open(path, "wb") as f:  # waits for the reader
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "json"])
def test_a_trace_from_a_fifo_is_read_uncached(tmp_path, private_cache, compressed):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    checked = threading.Thread(target=lambda: (cache.holds(fifo), start_workers_for([str(fifo)])), daemon=True)
    checked.start()
    checked.join(10)
    assert not checked.is_alive(), "opened the FIFO (blocks without a writer)"
    data = SMALL.read_bytes()
    writer = feed_fifo(fifo, data if compressed else gzip.decompress(data))
    trace = load_trace(fifo)
    writer.join(10)
    cold = load_trace(SMALL, cache=False)
    assert len(trace.events) == len(cold.events) and trace.names == cold.names
    same = {"path": "", "file_bytes": 0, "compressed": True}
    assert dataclasses.replace(trace.meta, **same) == dataclasses.replace(cold.meta, **same)
    assert trace.meta.compressed == compressed
    assert trace.meta.file_bytes == len(data if compressed else gzip.decompress(data))  # as much as was read
    assert entry_names(private_cache) == []


def test_a_trace_from_process_substitution_is_read_uncached(private_cache):
    """``kerneltui summary <(zcat t.json.gz)``: a /dev/fd path to a pipe."""
    expected = kerneltui("summary", str(SMALL), "--format", "json")
    code = f"exec {sys.executable} -m kerneltui summary <(zcat {SMALL}) --format json"
    started = time.monotonic()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    got, want = json.loads(out.stdout), json.loads(expected.stdout)
    assert got["trace"]["path"].startswith("/dev/fd/")
    assert {**got["summary"], "path": ""} == {**want["summary"], "path": ""} and got["kernels"] == want["kernels"]
    assert len(list(private_cache.glob("*.arrow"))) == 1  # SMALL's own, none for the pipe
    assert time.monotonic() - started < 60


def test_a_character_device_is_not_cached_or_waited_on(private_cache):
    out = kerneltui("summary", "/dev/null", timeout=30)
    assert out.returncode == 2 and out.stderr == "kerneltui: /dev/null is empty (0 bytes): not a trace\n"
    assert entry_names(private_cache) == []
