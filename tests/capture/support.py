"""What the capture tests share: running the command in process, reading what it wrote.

No torch here (test_params.py runs without it); tests that capture skip without torch.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import textwrap
from pathlib import Path

import orjson

from kerneltui.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
STEPS = 2

# example -> (its -p options, the file-name stem they give)
EXAMPLE_OPTIONS = {
    "add_relu": (["-p", "n=1e3"], "add_relu_n1000"),
    "mlp": (["-p", "width=32", "-p", "tokens=16"], "mlp_width32_tokens16"),
    "train_step": (["-p", "batch=8", "-p", "width=16"], "train_step_batch8_width16"),
}


def capture(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["capture", *argv])
    return rc, out.getvalue(), err.getvalue()


def read(path: Path) -> dict:
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b", f"{path} is not gzip"
    return orjson.loads(gzip.decompress(raw))


def spans(trace: dict, cat: str, prefix: str) -> list[dict]:
    events = trace["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == cat and e["name"].startswith(prefix)]


def write_workload(directory: Path, name: str, source: str) -> Path:
    path = directory / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path
