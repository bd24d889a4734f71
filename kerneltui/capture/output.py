"""Trace files: their names, the `kerneltui.capture` block inside them, and writes that never leave half a file."""

from __future__ import annotations

import gzip
import os
import platform
import secrets
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kerneltui import __version__
from kerneltui.capture.params import label
from kerneltui.errors import UserError


def _stem(workload: str, params: dict[str, Any], mode: str) -> str:
    return "_".join(part for part in (workload, label(params), mode) if part)


def trace_path(out_dir: Path, workload: str, params: dict[str, Any], mode: str, compressed: bool) -> Path:
    """`traces/add_relu_n1000000_eager.json.gz`: the workload, its parameters and the mode."""
    return out_dir / f"{_stem(workload, params, mode)}.json{'.gz' if compressed else ''}"


def rank_trace_path(out_dir: Path, workload: str, params: dict[str, Any], mode: str, compressed: bool,
                    rank: int) -> Path:
    """Under torchrun: `traces/add_relu_n1000000_eager/add_relu_n1000000_eager_rank0.json.gz`. One directory
    per mode, so that `kerneltui summary DIR` reads each as a rank job (and `diff DIR DIR` rank by rank)."""
    stem = _stem(workload, params, mode)
    return out_dir / stem / f"{stem}_rank{rank}.json{'.gz' if compressed else ''}"


def provenance_path(out_dir: Path, workload: str, params: dict[str, Any], mode: str) -> Path:
    """`traces/add_relu_n1000000_compiled.provenance.json`: named as the trace of that mode would be."""
    return out_dir / f"{_stem(workload, params, mode)}.provenance.json"


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


def _put(data: bytes, final: Path, overwrite: bool) -> None:
    """Writes under a scratch name beside `final`, then moves it into place: never half a file.

    Without `overwrite` the move is a hard link, which fails if `final` appeared meanwhile
    (the up-front check has a window; this has none).
    """
    partial = scratch_path(final, ".partial")
    try:
        try:
            with open(partial, "xb") as file:  # unlike mkstemp's 0600, this honours the umask
                file.write(data)
        except OSError as exc:  # the directory became unwritable, the disk filled: the partial goes below
            raise UserError(f"{final}: cannot write it: {exc.strerror or exc}") from None
        if overwrite:
            os.replace(partial, final)
            return
        try:
            os.link(partial, final)
        except FileExistsError:
            raise UserError(f"{final} exists: pass --force to overwrite") from None
        except OSError:  # a file system without hard links: the up-front check is all there is
            if final.exists():
                raise UserError(f"{final} exists: pass --force to overwrite") from None
            os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)


def write_trace(exported: Path, final: Path, capture: dict[str, Any], provenance: dict[str, Any] | None = None,
                overwrite: bool = True) -> None:
    """Adds `{"kerneltui": {"capture": ..., "provenance": ...}}` to the profiler's export and puts it at `final`.

    The block goes first among the top-level keys, where a reader finds it without
    parsing the events; Perfetto and chrome://tracing ignore keys they do not know.
    """
    trace = orjson.loads(exported.read_bytes())
    capture = {**capture, "time": datetime.now(UTC).isoformat(timespec="seconds")}
    block = {"capture": capture, **({"provenance": provenance} if provenance is not None else {})}
    data = orjson.dumps({"kerneltui": block, **trace})
    if final.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)  # 9: 3x the time for 10% less (a 5 MB trace)
    _put(data, final, overwrite)


def write_provenance(final: Path, provenance: dict[str, Any], overwrite: bool = False) -> None:
    """`--provenance-only`: the `provenance` object alone, as plain JSON (indented: people read it)."""
    _put(orjson.dumps(provenance, option=orjson.OPT_INDENT_2) + b"\n", final, overwrite)
