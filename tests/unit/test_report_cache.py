"""`summary TRACE` answered from its kept report (commands/report_cache.py): the same bytes, at once.

The report equals what the full path prints on every repository trace, in every format; it is
kept per file, command line and terminal, and never outlives an edit of the file.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import pytest

from kerneltui.cli import main
from kerneltui.commands import kept, report_cache
from kerneltui.trace import cache_dir
from tests.conftest import PROJECT_TRACES, ROOT, SHARED_TRACES, cache_env

EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
REPOSITORY_TRACES = sorted([*PROJECT_TRACES.glob("*.json.gz"), *SHARED_TRACES.glob("*.json.gz")])


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def reports(private_cache) -> list[str]:
    return sorted(p.name for p in private_cache.glob("*.report")) if private_cache.exists() else []


@pytest.mark.parametrize("path", REPOSITORY_TRACES, ids=lambda p: p.name)
def test_the_kept_report_equals_the_full_path_on_every_repository_trace(capsys, private_cache, path):
    full = run(capsys, "summary", str(path), "--format", "json", "--no-cache")
    first = run(capsys, "summary", str(path), "--format", "json")
    assert len(reports(private_cache)) == 1
    kept = run(capsys, "summary", str(path), "--format", "json")
    assert full == first == kept


def test_every_format_and_view_is_kept_apart_and_replayed_exactly(capsys, private_cache):
    gpt = str(SHARED_TRACES / "gpt_train_eager.json.gz")
    asked = [("--format", "table"), ("--format", "csv"), ("--overview",), ("--memory", "--format", "csv"),
             ("--health",), ("--by", "module"), ("--top", "3")]
    first = [run(capsys, "summary", gpt, *a) for a in asked]
    assert len(reports(private_cache)) == len(asked)
    assert [run(capsys, "summary", gpt, *a) for a in asked] == first
    assert first[2][1].startswith(f"{gpt}\neach step's span: kernel > memcpy")


def test_a_hit_imports_neither_numpy_nor_pandas(private_cache):
    code = ("import sys; from kerneltui.cli import main; rc = main(['summary', sys.argv[1], '--format', 'json']);"
            " print(sorted(m for m in ('numpy', 'pandas', 'pyarrow') if m in sys.modules), file=sys.stderr)")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    runs = [subprocess.run([sys.executable, "-c", code, str(EAGER)], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=60, check=True) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.startswith("{")
    assert runs[0].stderr.strip().endswith("['numpy', 'pandas', 'pyarrow']")  # the first run computed it
    assert runs[1].stderr.strip() == "[]"


def test_an_edited_trace_is_never_answered_from_its_old_report(capsys, private_cache, tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(EAGER, trace)
    before = run(capsys, "summary", str(trace), "--format", "json")
    shutil.copyfile(PROJECT_TRACES / "add_relu_1M_compiled.json.gz", trace)  # same name, other content
    after = run(capsys, "summary", str(trace), "--format", "json")
    assert before != after and '"triton_poi_fused_add_relu_0"' in after[1]
    assert after == run(capsys, "summary", str(trace), "--format", "json", "--no-cache")


def test_the_terminal_width_and_the_options_are_part_of_the_key(capsys, private_cache, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    narrow = run(capsys, "summary", str(EAGER))
    monkeypatch.setenv("COLUMNS", "150")
    wide = run(capsys, "summary", str(EAGER))
    assert len(reports(private_cache)) == 2 and wide == run(capsys, "summary", str(EAGER), "--no-cache")
    monkeypatch.setenv("COLUMNS", "80")
    assert run(capsys, "summary", str(EAGER)) == narrow


def test_nothing_is_kept_without_the_cache_or_from_a_run_that_failed(capsys, private_cache, monkeypatch):
    run(capsys, "summary", str(EAGER), "--no-cache")
    monkeypatch.setenv("KERNELTUI_CACHE", "0")
    run(capsys, "summary", str(EAGER))
    assert reports(private_cache) == []
    monkeypatch.delenv("KERNELTUI_CACHE")
    code, _, err = run(capsys, "summary", str(EAGER), "--health", "--top", "2")  # refused: a UserError
    assert code == 2 and err.startswith("kerneltui: --health prints only") and reports(private_cache) == []


def test_a_traces_warnings_and_exit_status_are_replayed_with_its_report(capsys, private_cache, tmp_path):
    cut = tmp_path / "cut.json"
    text = gzip.decompress(EAGER.read_bytes())
    cut.write_bytes(text[: len(text) * 2 // 3])  # a profiler stopped mid-write
    first = run(capsys, "summary", str(cut), "--format", "json")
    assert first[0] == 2 and first[2] == (f"kerneltui: {cut}: trace is cut off (a profiler stopped mid-write?):"
                                          " loaded the 10 complete events before the cut\n")
    assert len(reports(private_cache)) == 1
    assert run(capsys, "summary", str(cut), "--format", "json") == first


def test_a_damaged_or_planted_report_is_a_miss_and_is_replaced(capsys, private_cache):
    first = run(capsys, "summary", str(EAGER), "--format", "json")
    (entry,) = private_cache.glob("*.report")
    entry.write_bytes(entry.read_bytes()[:-10])  # cut short
    assert run(capsys, "summary", str(EAGER), "--format", "json") == first
    key = entry.read_bytes().split(b'"key": "')[1][:32].decode()
    assert report_cache._read(kept.Kept(private_cache, key, entry)) is not None  # rewritten whole
    entry.unlink()
    os.mkfifo(entry)  # a FIFO at its name: opened without waiting, never read, left alone
    assert run(capsys, "summary", str(EAGER), "--format", "json") == first
    assert entry.is_fifo()
    entry.unlink()
    entry.symlink_to(EAGER)  # a link at its name: never followed
    assert run(capsys, "summary", str(EAGER), "--format", "json") == first
    assert entry.is_symlink()


def test_cache_clear_removes_the_reports_too(capsys, private_cache):
    run(capsys, "summary", str(EAGER), "--format", "json")
    assert (cache_dir.stats(private_cache).entries, cache_dir.stats(private_cache).reports) == (1, 1)
    assert cache_dir.clear(private_cache)[0] == 2
    assert reports(private_cache) == []


def test_an_unsafe_cache_directory_is_not_used_and_said_once(capsys, private_cache, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # another user could swap the cache directory for theirs
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    code, out, err = run(capsys, "summary", str(EAGER), "--format", "json")
    assert code == 0 and out.startswith("{")
    assert err == f"kerneltui: cache not used: {shared} is writable by others\n"
    assert not (shared / "kerneltui").exists()


def test_an_output_too_big_to_keep_is_written_but_not_kept(capsys, private_cache, monkeypatch):
    monkeypatch.setattr(report_cache, "KEEP_UP_TO", 100)
    code, out, _ = run(capsys, "summary", str(EAGER), "--format", "json")
    assert code == 0 and len(out) > 100 and out.startswith("{")
    assert reports(private_cache) == []
