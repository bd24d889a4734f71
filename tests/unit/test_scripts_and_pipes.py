"""The commands in scripts and pipes: no full screen without a terminal on both ends, no screen for a
missing file, and a rank directory that holds other files."""

from __future__ import annotations

import gzip
import json
import os
import pty
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import DATA, ROOT, cache_env

EAGER = "traces/add_relu_1M_eager.json.gz"
COMPILED = "traces/add_relu_1M_compiled.json.gz"
RANK = DATA / "external" / "hta__trace_filter__sampled_rank-{}.json.gz"


def run(*args: str, stdin=subprocess.DEVNULL, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    return subprocess.run([sys.executable, "-m", "kerneltui", *args], stdin=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


@pytest.mark.parametrize("command", [["open", EAGER], [EAGER]])
def test_open_without_a_terminal_prints_the_summary(command):
    out = run(*command)
    expected = run("summary", EAGER)
    assert (out.returncode, out.stdout, out.stderr) == (expected.returncode, expected.stdout, expected.stderr) == (
        0, expected.stdout, "")
    assert out.stdout.startswith(f"{EAGER}\ndevice      NVIDIA H200\n") and "\x1b" not in out.stdout


def test_diff_into_a_file_prints_the_table_and_never_waits():
    out = run("diff", EAGER, COMPILED, timeout=60)
    expected = run("diff", "--format", "table", EAGER, COMPILED)
    assert (out.returncode, out.stdout) == (0, expected.stdout)
    assert out.stdout.startswith(f"A  {EAGER}\nB  {COMPILED}\n") and "\x1b" not in out.stdout + out.stderr


def test_open_a_directory_without_a_terminal_prints_the_job(tmp_path):
    for r in (0, 1):
        shutil.copy(str(RANK).format(r), tmp_path)
    out = run("open", str(tmp_path))
    expected = run("summary", str(tmp_path))
    assert (out.returncode, out.stdout) == (expected.returncode, expected.stdout)
    assert out.stdout.startswith("2 ranks of world_size 128")


def test_format_still_works_as_before():
    assert run("diff", "--format", "json", EAGER, COMPILED).stdout.lstrip().startswith("{")


def _on_a_pty(*args: str, timeout: float = 30) -> tuple[int, bytes]:
    """Run the command with a pty as stdin, stdout and stderr; what it wrote, and its exit status."""
    main, child = pty.openpty()
    env = {"COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT), **cache_env()}
    proc = subprocess.Popen([sys.executable, "-m", "kerneltui", *args], stdin=child, stdout=child, stderr=child,
                            env=env, cwd=ROOT, close_fds=True)
    os.close(child)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    status = proc.wait(timeout=5)
    os.close(main)
    return status, out


def test_a_missing_file_on_a_terminal_is_one_line_and_no_screen():
    status, out = _on_a_pty("open", "missing.json")
    assert status == 2
    assert out.decode() == "kerneltui: missing.json: no such file\r\n"  # no alternate screen, no key awaited
    status, out = _on_a_pty("diff", EAGER, "missing.json")
    assert (status, out.decode()) == (2, "kerneltui: missing.json: no such file\r\n")


# -- a rank directory that holds other files -------------------------------------------------------

def _job(tmp_path, notes: bool = True, single: bool = True):
    for r in (0, 1):
        shutil.copy(str(RANK).format(r), tmp_path / f"rank-{r}.json.gz")
    if notes:
        (tmp_path / "notes.json").write_text(json.dumps({"notes": "run 42, lr 3e-4"}))
    if single:  # a single-GPU trace of another run, dropped in the directory
        shutil.copy(DATA / "traces" / "gpt_train_eager.json.gz", tmp_path / "zz_single.json.gz")
    return tmp_path


def test_files_that_are_no_trace_and_traces_of_another_run_are_skipped(tmp_path):
    out = run("summary", str(_job(tmp_path)))
    assert out.returncode == 0
    assert out.stdout.splitlines()[0] == "2 ranks of world_size 128 · unknown device"
    assert "kerneltui: skipped notes.json: is JSON but not a Chrome trace (no traceEvents array)\n" in out.stderr
    assert ("kerneltui: skipped zz_single.json.gz: it has no distributedInfo, unlike the other ranks (a trace of "
            "another run?)\n") in out.stderr
    doc = json.loads(run("summary", "--format", "json", str(tmp_path)).stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["job"]["failed"] == 0


def test_a_trace_of_another_world_size_is_skipped(tmp_path):
    _job(tmp_path, notes=False, single=False)
    doc = json.loads(gzip.open(str(RANK).format(0)).read())
    doc["distributedInfo"]["world_size"] = 4
    (tmp_path / "other.json").write_text(json.dumps(doc))
    out = run("summary", str(tmp_path))
    assert out.returncode == 0
    assert "kerneltui: skipped other.json: it is of world_size 4, the other ranks' is 128 (a trace of another run?)" \
        in out.stderr


def test_diff_of_two_such_directories_exits_0(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _job(a)
    _job(b)
    out = run("diff", str(a), str(b))
    assert out.returncode == 0, out.stderr
    assert "skipped notes.json" in out.stderr


def test_a_directory_of_traces_without_distributed_info_is_numbered_from_file_names(tmp_path):
    for r in (0, 1):
        shutil.copy(DATA / "traces" / "gpt_train_eager.json.gz", tmp_path / f"rank{r}.json.gz")
    (tmp_path / "notes.json").write_text("{}")
    out = run("summary", "--format", "json", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert [r["rank"] for r in json.loads(out.stdout)["ranks"]] == [0, 1]


def test_bytes_that_are_not_json_are_skipped_unless_the_name_claims_a_rank(tmp_path):
    """A binary dropped beside the ranks is no rank; rank2.json holding garbage is a rank that failed (exit 2)."""
    _job(tmp_path, notes=False, single=False)
    (tmp_path / "plot.json").write_bytes(b"\x89PNG\r\n")
    out = run("summary", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "kerneltui: skipped plot.json: is not JSON (it starts with b'\\x89PNG\\r\\n')\n" in out.stderr
    (tmp_path / "rank2.json").write_bytes(b"\x00garbage")
    out = run("summary", "--format", "json", str(tmp_path))
    assert out.returncode == 2
    assert json.loads(out.stdout)["job"]["failed"] == 1
