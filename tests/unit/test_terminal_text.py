"""Trace text never drives the terminal: control, C1 and bidi characters are shown escaped.

A trace is a file someone sends you. Its names reach `summary` and `diff`
output, error lines and warnings; written raw, ``\\x1b]52;...\\x07`` would set
your clipboard and ``\\x1b[2J`` clear your screen. Each test below writes a
small crafted trace (``hostile_trace``) and checks the bytes a command writes:
the escaped text is there (backslash, x, 1, b), the control characters are not.
JSON, and CSV to a file or a pipe, keep the exact names.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
import tty
from pathlib import Path

import orjson
import pytest

from kerneltui import cli
from kerneltui.terminal_text import is_printable, json_safe, printable, printable_lines
from tests.conftest import ROOT, cache_env

# -- a hostile trace ---------------------------------------------------------------------------
# OSC 52 (clipboard), SGR colours, a C1 CSI, a bidi override, TAB/CR/LF/NUL/DEL and Rich markup in one name
KERNEL = "evil\x1b]52;c;cHduZWQ=\x07\x1b[31mRED\x1b[0m_kernel\x9b2J\u202eabc\t\r\n\x00\x7f[bold red]x[/]"
KERNEL_SHOWN = (
    r"evil\x1b]52;c;cHduZWQ=\x07\x1b[31mRED\x1b[0m_kernel\x9b2J\u202eabc\x09\x0d\x0a\x00\x7f[bold red]x[/]"
)
OP = "aten::evil\x1b[2J[bold]op[/bold]"
OP_SHOWN = r"aten::evil\x1b[2J[bold]op[/bold]"
TRITON = "triton_poi_evil\x1b[1m_0"  # one Triton name, two kernel_hash values: the hash joins the short name
TRITON_SHOWN = r"triton_poi_evil\x1b[1m_0"
HASHES = ("\x1b[31mAAAAAAAA", "\x1b]52;BBBBBBBB")
THREAD = "thr\x1b]0;title\x07"
THREAD_SHOWN = r"thr\x1b]0;title\x07"
DEVICE = "NVIDIA \x1b[5mH200\u202e[link=https://evil.example]click[/link]"
DEVICE_SHOWN = r"NVIDIA \x1b[5mH200\u202e[link=https://evil.example]click[/link]"
STEP = "step\x1b[31m[red]S[/red]"  # a repeated record_function: the calls' name
STEP_SHOWN = r"step\x1b[31m[red]S[/red]"
SOURCE = "/tmp/evil\x1b]8;;http://x\x07link/model.py(12): forward"  # with_stack: the user frame
SOURCE_SHOWN = r"/tmp/evil\x1b]8;;http://x\x07link/model.py(12): forward"
MODULE = "Evil\x1b[2J_0"
MODULE_SHOWN = r"Evil\x1b[2J_0"
CAPTURE = {"name": "wl\x1b[31m", "params": {"n\x07": "v\x1b[0m", "device": "cuda"}, "mode": "eager\x9b",
           "torch": "2.\x1b[1m", "profiled_calls": 2, "warmup_calls": 1}
CAPTURE_SHOWN = r"wl\x1b[31m n\x07=v\x1b[0m, eager\x9b, torch 2.\x1b[1m, 2 calls after 1 warm-up"

# what must never reach a terminal from a trace (a report's own line breaks aside)
UNSAFE = (
    {chr(c) for c in range(0x20) if c != 0x0A}
    | {chr(c) for c in range(0x7F, 0xA0)}
    | set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")
)


def hostile_doc() -> dict:
    """Two calls of a record_function, each an op launching a kernel and a Triton op launching its kernel."""
    pid, tid, events, corr = 100, 100, [], 1
    for call in range(2):
        base = 1000.0 + 1000 * call
        events += [
            {"ph": "X", "cat": "user_annotation", "name": STEP, "pid": pid, "tid": tid, "ts": base, "dur": 500.0},
            {"ph": "X", "cat": "python_function", "name": SOURCE, "pid": pid, "tid": tid, "ts": base + 5,
             "dur": 400.0, "args": {"Python id": 1 + 10 * call, "Python parent id": -1}},
            {"ph": "X", "cat": "python_function", "name": f"nn.Module: {MODULE}", "pid": pid, "tid": tid,
             "ts": base + 6, "dur": 390.0, "args": {"Python id": 2 + 10 * call, "Python parent id": 1 + 10 * call}},
        ]
        launches = ((OP, KERNEL, "cudaLaunchKernel", {}),
                    (TRITON, TRITON, "cuLaunchKernel", {"kernel_hash": HASHES[call]}))
        for j, (op, kernel, launch, extra) in enumerate(launches):
            t, ext = base + 10 + 150 * j, 100 * call + j + 1
            events += [
                {"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": tid, "ts": t, "dur": 100.0,
                 "args": {"External id": ext, **extra}},
                {"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": pid, "tid": tid, "ts": t + 10, "dur": 5.0,
                 "args": {"External id": ext, "correlation": corr, "cbid": 211}},
                {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 20, "dur": 3.0,
                 "args": {"External id": ext, "correlation": corr, "device": 0, "stream": 7, "grid": [1, 1, 1],
                          "block": [128, 1, 1], "registers per thread": 16, "shared memory": 0}},
                {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": t + 10, "cat": "ac2g", "name": "ac2g"},
                {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            ]
            corr += 1
    events += [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0, "args": {"name": THREAD}},
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": "py\x1b[31m"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "ts": 0, "args": {"labels": "GPU\x1b[31m 0"}},
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": DEVICE, "totalGlobalMem": 1 << 30, "computeMajor": 9,
                              "computeMinor": 0, "numSms": 132}],
        "record_shapes": 1,
        "with_stack": 1,
        "kerneltui": {"capture": CAPTURE},
        "displayTimeUnit": "ms",
        "traceEvents": events,
    }


def hostile_trace(directory: Path, name: str = "hostile.json", cut: bool = False) -> Path:
    """The hostile trace written to ``directory/name``; ``cut`` keeps its first two thirds (a warning)."""
    text = orjson.dumps(hostile_doc(), option=orjson.OPT_INDENT_2)
    path = directory / name
    path.write_bytes(text[: len(text) * 2 // 3] if cut else text)
    return path


def unsafe_in(text: str) -> list[str]:
    return sorted({c for c in text if c in UNSAFE})


def assert_inert(data: bytes) -> str:
    """The bytes carry no control, C1 or bidi character (newlines aside); returns them decoded."""
    text = data.decode("utf-8")
    assert unsafe_in(text) == [], f"terminal control characters in the output: {unsafe_in(text)}"
    assert b"\x1b" not in data and b"\x07" not in data and b"\xc2\x9b" not in data
    return text


def run_cli(*args: str, columns: int = 80, tty_stdout: bool = False) -> tuple[int, bytes, bytes]:
    """`python -m kerneltui ARGS` in a real process: (exit status, stdout bytes, stderr bytes).

    ``tty_stdout`` gives it a pseudo-terminal for stdout (in raw mode, so the
    bytes read back are the bytes written: no LF to CRLF translation).
    """
    env = {"COLUMNS": str(columns), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    command = [sys.executable, "-m", "kerneltui", *args]
    if not tty_stdout:
        done = subprocess.run(command, capture_output=True, env=env, cwd=ROOT, timeout=60)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen(command, stdout=slave, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=60), bytes(out), err


# -- printable ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, shown",
    [
        ("\x1b]52;c;cHduZWQ=\x07", r"\x1b]52;c;cHduZWQ=\x07"),
        ("\x1b[31mRED\x1b[0m", r"\x1b[31mRED\x1b[0m"),
        ("a\x07b", r"a\x07b"),
        ("a\rb", r"a\x0db"),
        ("a\nb", r"a\x0ab"),
        ("a\tb", r"a\x09b"),
        ("a\x00b", r"a\x00b"),
        ("a\x7fb", r"a\x7fb"),
        ("a\x9b2Jb", r"a\x9b2Jb"),  # 8-bit CSI
        ("a\x9d0;t\x9cb", r"a\x9d0;t\x9cb"),  # 8-bit OSC ... ST
        ("a\x85b", r"a\x85b"),  # NEL
        ("abc\u202edef", r"abc\u202edef"),
        ("\u200e\u200f\u061c", r"\u200e\u200f\u061c"),
        ("\u202a\u202b\u202c\u202d", r"\u202a\u202b\u202c\u202d"),
        ("\u2066\u2067\u2068\u2069", r"\u2066\u2067\u2068\u2069"),
        ("a\u2028b\u2029c", r"a\u2028b\u2029c"),
        (KERNEL, KERNEL_SHOWN),
    ],
)
def test_control_and_bidi_characters_are_written_as_visible_escapes(raw, shown):
    assert printable(raw) == shown
    assert unsafe_in(printable(raw)) == []
    assert not is_printable(raw) and is_printable(shown)


@pytest.mark.parametrize(
    "text",
    [
        "vectorized_elementwise_kernel<CUDAFunctor_add>[f32]",
        "178.9µs · ≥ → ← ▼ █",
        "核函数_カーネル_커널",
        "emoji 🚀👩‍💻 (ZWJ kept)",
        "[bold red]x[/] is text here, not markup",
        "back\\slash and \\x1b written out",
        "",
    ],
)
def test_ordinary_text_is_returned_as_it_is(text):
    assert printable(text) is text  # no copy: plain names cost one regex search
    assert is_printable(text)


def test_every_dangerous_code_point_is_escaped_and_nothing_else():
    dangerous = (set(range(0x20)) | set(range(0x7F, 0xA0)) | {0x061C, 0x200E, 0x200F, 0x2028, 0x2029}
                 | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)))
    for code in range(0x3000):
        c = chr(code)
        if code in dangerous:
            assert printable(c) == (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")
        else:
            assert printable(c) == c


def test_printable_lines_escapes_inside_lines_and_ends_each_with_a_newline():
    assert printable_lines(["a\nb", "c\x1b"]) == "a\\x0ab\nc\\x1b\n"
    assert printable_lines(["a\nb", "c"]) == "a\\x0ab\nc\n"  # a newline inside a line is not a line break
    assert printable_lines(["a", "", "µs 核"]) == "a\n\nµs 核\n"


def test_the_isprintable_fast_path_never_lets_a_dangerous_character_through():
    """printable() trusts str.isprintable(): it must be False for every character that is escaped."""
    assert len(UNSAFE | {"\n"}) == 0x20 + 0x21 + 1 + 2 + 5 + 4 + 2
    for c in UNSAFE | {"\n"}:
        assert not c.isprintable() and not is_printable(c) and not is_printable(f"kernel{c}name")


def test_json_safe_keeps_the_exact_strings_and_no_raw_c1_or_bidi():
    doc = {"name": KERNEL, "bidi": "\u202e\u2066\u2028", "plain": "µs 核"}
    text = json_safe(orjson.dumps(doc).decode())
    assert json.loads(text) == doc
    assert unsafe_in(text) == []
    assert r"\u009b" in text and r"\u202e" in text and r"\u001b" in text
    plain = orjson.dumps({"a": "µs"}).decode()
    assert json_safe(plain) is plain


# -- kerneltui summary --------------------------------------------------------------------------
def test_summary_table_escapes_every_trace_text(tmp_path):
    path = hostile_trace(tmp_path)
    rc, out, err = run_cli("summary", str(path))
    assert rc == 0, err
    text = assert_inert(out)
    lines = text.splitlines()
    assert lines[0] == str(path)
    assert f"device      {DEVICE_SHOWN}" in lines
    assert f"calls       2 (record_function {STEP!r})" in lines  # the data layer's repr: escaped already
    assert f"captured    {CAPTURE_SHOWN}" in lines
    # 80 columns: the name is cut in the middle, after it was escaped (the cut never splits a raw ESC)
    assert r"evil\x1b]52;c;cHduZWQ=\x07…" in text
    assert any(line.startswith(f"  {OP_SHOWN[:20]}") for line in lines)
    assert any(line.startswith(f"{TRITON_SHOWN}@\\x1b[31mA") for line in lines)  # kernel_hash in the short name
    table = lines[lines.index("") + 1 :]
    assert max(len(line) for line in table) <= 80  # the escapes were measured: the table still fits


def test_summary_launch_table_shows_whole_escaped_names(tmp_path):
    rc, out, err = run_cli("summary", str(hostile_trace(tmp_path)), "--launches", "--full-names", columns=300)
    assert rc == 0, err
    text = assert_inert(out)
    rows = [line for line in text.splitlines() if KERNEL_SHOWN in line]
    assert len(rows) == 2 and all(row.endswith(OP_SHOWN) for row in rows)
    assert sum(f"{TRITON_SHOWN} " in line for line in text.splitlines()) == 2


def test_summary_json_keeps_exact_names_and_writes_no_control_character(tmp_path):
    rc, out, err = run_cli("summary", str(hostile_trace(tmp_path)), "--format", "json", "--launches")
    assert rc == 0, err
    text = assert_inert(out)  # orjson escapes C0; json_safe the C1 and bidi characters
    doc = json.loads(text)
    assert doc["trace"]["device"] == DEVICE
    assert doc["summary"]["capture"] == CAPTURE
    assert KERNEL in [k["short"] for k in doc["kernels"]]
    assert {row["op"] for row in doc["launches"]} == {OP, TRITON}


def test_summary_csv_to_a_pipe_is_exact(tmp_path):
    rc, out, err = run_cli("summary", str(hostile_trace(tmp_path)), "--format", "csv")
    assert rc == 0, err
    rows = list(csv.DictReader(io.StringIO(out.decode(), newline="")))
    assert KERNEL in [r["short"] for r in rows]
    assert {r["op"] for r in rows} == {OP, TRITON}
    assert b"\x1b" in out  # exact: a file or a pipe gets the names as they are


def test_summary_csv_to_a_terminal_is_escaped(tmp_path):
    rc, out, err = run_cli("summary", str(hostile_trace(tmp_path)), "--format", "csv", tty_stdout=True)
    assert rc == 0, err
    text = assert_inert(out)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert KERNEL_SHOWN in [r["short"] for r in rows]
    assert {r["op"] for r in rows} == {OP_SHOWN, TRITON_SHOWN}
    assert len(text.splitlines()) == 1 + 3  # header and three kernels: no name breaks a row


def test_summary_csv_terminal_branch_in_process(tmp_path, capsys, monkeypatch):
    path = str(hostile_trace(tmp_path))
    for tty_out, expected in ((True, KERNEL_SHOWN), (False, KERNEL)):
        monkeypatch.setattr(sys.stdout, "isatty", lambda tty_out=tty_out: tty_out)
        assert cli.main(["summary", path, "--format", "csv"]) == 0
        out = capsys.readouterr().out
        assert expected in [r["short"] for r in csv.DictReader(io.StringIO(out, newline=""))]


# -- kerneltui diff -------------------------------------------------------------------------------
def test_diff_table_escapes_every_trace_text(tmp_path):
    a, b = hostile_trace(tmp_path, "a.json"), hostile_trace(tmp_path, "b\x1b[31m.json")
    rc, out, err = run_cli("diff", str(a), str(b), "--format", "table")
    assert rc == 0, err
    text = assert_inert(out)
    lines = text.splitlines()
    assert lines[:2] == [f"A  {a}", f"B  {tmp_path}/b\\x1b[31m.json"]
    # cut to the column after escaping: the cut shows text, it cannot leave half an escape sequence raw
    assert r"device                NVIDIA \x1b[5mH200\u… NVIDIA \x1b[5mH200\u…" in lines
    assert any(line.startswith(r"evil\x1b]52;c;cHduZWQ=\x07\x1b[31mRED\x1b[0m_kernel\x9b2J\u202eabc") for line in lines)
    assert max(len(line) for line in lines[2:]) <= 80  # (the paths of A and B aside)


def test_diff_markdown_escapes_every_trace_text(tmp_path):
    a, b = hostile_trace(tmp_path, "a.json"), hostile_trace(tmp_path, "b\x1b[31m.json")
    rc, out, err = run_cli("diff", str(a), str(b), "--format", "markdown")
    assert rc == 0, err
    text = assert_inert(out)
    assert text.startswith("### kerneltui diff: `a.json` → `b\\x1b[31m.json`\n")
    assert f"| device | {DEVICE_SHOWN} | {DEVICE_SHOWN} |  |" in text
    assert f"| calls | 2 ({STEP_SHOWN}) | 2 ({STEP_SHOWN}) |  |" in text
    assert f"| `{KERNEL_SHOWN} + " in text and "| same·high |" in text  # both kernels in one row: same place, same kernels


def test_diff_json_keeps_exact_names_and_writes_no_control_character(tmp_path):
    a, b = hostile_trace(tmp_path, "a.json"), hostile_trace(tmp_path, "b\x1b[31m.json")
    rc, out, err = run_cli("diff", str(a), str(b), "--format", "json")
    assert rc == 0, err
    doc = json.loads(assert_inert(out))
    assert doc["a"]["device"] == DEVICE and doc["b"]["path"] == str(b)
    assert any(KERNEL in m["a_kernels"] and KERNEL in m["b_kernels"] for m in doc["matches"])


# -- error and warning lines --------------------------------------------------------------------
@pytest.mark.parametrize("command", ["summary", "diff"])
def test_an_error_line_escapes_the_path(tmp_path, command):
    missing = tmp_path / "nope\x1b[31m\x07.json"
    args = [command, str(missing)] + ([str(missing), "--format", "json"] if command == "diff" else [])
    rc, out, err = run_cli(*args)
    assert rc == 2 and out == b""
    assert assert_inert(err) == f"kerneltui: {tmp_path}/nope\\x1b[31m\\x07.json: no such file\n"


def test_warnings_escape_the_path(tmp_path):
    cut = hostile_trace(tmp_path, "cut\x1b]0;t\x07.json", cut=True)
    shown = f"{tmp_path}/cut\\x1b]0;t\\x07.json"
    rc, out, err = run_cli("summary", str(cut))
    assert rc == 2
    assert_inert(out)
    assert assert_inert(err).startswith(f"kerneltui: {shown}: trace is cut off")
    rc, out, err = run_cli("diff", str(cut), str(hostile_trace(tmp_path)), "--format", "json")
    assert rc == 2
    assert assert_inert(err).startswith(f"kerneltui: {shown}: trace is cut off")


def test_the_cli_error_line_escapes_the_message(capsys):
    missing = "/nonexistent/\x1b]52;c;cHduZWQ=\x07.json"
    assert cli.main(["summary", missing]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "kerneltui: /nonexistent/\\x1b]52;c;cHduZWQ=\\x07.json: no such file\n"


def test_open_prints_its_error_line_escaped_on_stderr(capsys, monkeypatch):
    import kerneltui.tui.app as tui_app

    from kerneltui.tui.loading_app import LoadingApp

    class FailedApp:
        error = "/tmp/bad\x1b[31m.json: no such file"
        return_code = 2
        loaded: list = []
        after_exit_lines = LoadingApp.after_exit_lines

        def run(self):
            pass

    monkeypatch.setattr(tui_app, "build_app", lambda path, loader=None: FailedApp())
    assert cli.main(["open", "/tmp/bad\x1b[31m.json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout may be a pipe of results: the error goes to stderr
    assert captured.err == "kerneltui: /tmp/bad\\x1b[31m.json: no such file\n"
