"""Trace files: their names, the `kerneltui.capture` block inside them, and writes that never leave half a file."""

from __future__ import annotations

import gzip
import os
import platform
import secrets
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from kerneltui import __version__
from kerneltui.capture.params import label


def trace_path(out_dir: Path, workload: str, params: dict[str, Any], mode: str, compressed: bool) -> Path:
    """`traces/add_relu_n1000000_eager.json.gz`: the workload, its parameters and the mode."""
    stem = "_".join(part for part in (workload, label(params), mode) if part)
    return out_dir / f"{stem}.json{'.gz' if compressed else ''}"


def environment() -> dict[str, Any]:
    """Versions and device of this machine, as stored in every trace it captures."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    cuda = torch.cuda.is_available()
    return {
        "kerneltui": __version__,
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "hostname": socket.gethostname(),
    }


def scratch_path(final: Path, suffix: str) -> Path:
    """A new temporary name beside `final`: hidden, and named after it so a leftover is recognisable."""
    return final.with_name(f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}")


def write_trace(exported: Path, final: Path, capture: dict[str, Any]) -> None:
    """Adds `{"kerneltui": {"capture": ...}}` to the profiler's export and puts it at `final` atomically.

    The block goes first among the top-level keys, where a reader finds it without
    parsing the events; Perfetto and chrome://tracing ignore keys they do not know.
    """
    trace = orjson.loads(exported.read_bytes())
    capture = {**capture, "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data = orjson.dumps({"kerneltui": {"capture": capture}, **trace})
    if final.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)  # 9: 3x the time for 10% less (a 5 MB trace)
    partial = scratch_path(final, ".partial")
    try:
        with open(partial, "xb") as file:  # unlike mkstemp's 0600, this honours the umask
            file.write(data)
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
