"""Small Kineto-shaped traces for tests: ops that launch kernels, inside ProfilerSteps.

    b = TraceBuilder()
    with b.step():
        b.op("aten::addmm", [[4096], [64, 1024], [1024, 4096]], kernels=["nvjet_gemm", 5.0])
    b.write(tmp_path / "t.json")

Times are in µs as Kineto writes them; every kernel gets a runtime launch whose
correlation links it, and its op's External id.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path


class TraceBuilder:
    def __init__(self, device: str = "NVIDIA H200", pid: int = 1, tid: int = 1):
        self.events: list[dict] = []
        self.t = 100.0  # CPU clock, µs
        self.gpu_t = 100.0  # GPU clock, µs
        self.ids = 0
        self.device = device
        self.pid, self.tid = pid, tid
        self.step_number = 0

    def _id(self) -> int:
        self.ids += 1
        return self.ids

    @contextmanager
    def step(self, name: str | None = None):
        start = self.t
        self.t += 1
        self.step_number += 1
        yield
        self.t += 1
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name or f"ProfilerStep#{self.step_number}",
                            "pid": self.pid, "tid": self.tid, "ts": start, "dur": self.t - start,
                            "args": {"External id": self._id()}})

    @contextmanager
    def region(self, name: str, cat: str = "cpu_op", tid: int | None = None):
        """An enclosing op or annotation (``Torch-Compiled Region: 0/0``, ``Optimizer.step#SGD.step``)."""
        start = self.t
        self.t += 0.5
        yield
        self.t += 0.5
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid or self.tid,
                            "ts": start, "dur": self.t - start, "args": {"External id": self._id()}})

    def op(self, name: str, dims=None, types=None, kernels=(), launch="cudaLaunchKernel", tid: int | None = None,
           cpu_us: float = 4.0):
        """One op launching ``kernels``: a list of (kernel name, GPU µs)."""
        ext = self._id()
        start = self.t
        args = {"External id": ext}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types or ["float"] * len(dims)
        tid = tid or self.tid
        self.t += 1
        for kname, gpu_us in kernels:
            corr = self._id()
            self.events.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": self.pid, "tid": tid,
                                "ts": self.t, "dur": 1, "args": {"External id": ext, "correlation": corr, "cbid": 211}})
            self.gpu_t = max(self.gpu_t, self.t + 2)
            kind = "gpu_memset" if kname.startswith("Memset") else "kernel"
            self.events.append({"ph": "X", "cat": kind, "name": kname, "pid": 0, "tid": 7, "ts": self.gpu_t,
                                "dur": gpu_us, "args": {"External id": ext, "correlation": corr, "stream": 7,
                                                         "device": 0}})
            self.gpu_t += gpu_us
            self.t += 1.5
        self.t = max(self.t, start + cpu_us)
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": self.pid, "tid": tid, "ts": start,
                            "dur": self.t - start, "args": args})
        self.t += 0.5

    def graph_replay(self, kernels):
        """One cudaGraphLaunch replaying ``kernels`` (no op per kernel)."""
        corr = self._id()
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": self.pid,
                            "tid": self.tid, "ts": self.t, "dur": 2, "args": {"correlation": corr, "cbid": 311}})
        self.gpu_t = max(self.gpu_t, self.t + 3)
        for kname, gpu_us in kernels:
            self.events.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": self.gpu_t,
                                "dur": gpu_us, "args": {"correlation": corr, "stream": 7, "device": 0}})
            self.gpu_t += gpu_us
        self.t += 3

    def idle(self, us: float) -> None:
        self.t += us

    def doc(self, **top) -> dict:
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": self.device, "numSms": 132}],
                "record_shapes": 1, "traceEvents": self.events, **top}

    def write(self, path: Path, **top) -> Path:
        path.write_text(json.dumps(self.doc(**top)))
        return path
