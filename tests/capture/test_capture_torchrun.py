"""`torchrun --nproc-per-node 2 -m kerneltui capture`: a trace per rank, each mode's directory a rank job.

Two processes on the CPU with gloo; about 15-20 s on a 2-core machine (two interpreters import torch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from tests.capture.support import ROOT, read, spans, write_workload

ALL_REDUCE = """
    import torch
    import torch.distributed as dist


    def step(x):
        y = x * 2
        dist.all_reduce(y)  # kerneltui set up the process group (gloo on the CPU)
        return y.relu()


    def workload(n: int = 64, device: str = "cuda"):
        return step, (torch.full((n,), float(dist.get_rank() + 1), device=device),)
"""


def _gloo() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_gloo_available()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available() or not _gloo(), reason="the CPU test: two processes with gloo")
def test_torchrun_writes_a_trace_per_rank_that_summary_reads_as_a_job(tmp_path):
    script = write_workload(tmp_path, "allreduce", ALL_REDUCE)
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "kerneltui", "capture",
         str(script), "--modes", "eager", "--steps", "2", "--warmup", "1", "-o", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    job = out / "allreduce_n64_eager"
    assert sorted(p.name for p in out.iterdir()) == [job.name]
    assert sorted(p.name for p in job.iterdir()) == ["allreduce_n64_eager_rank0.json.gz",
                                                     "allreduce_n64_eager_rank1.json.gz"]
    for rank in (0, 1):
        trace = read(job / f"allreduce_n64_eager_rank{rank}.json.gz")
        block = trace["kerneltui"]["capture"]
        assert (block["rank"], block["world_size"]) == (rank, 2)
        assert trace["distributedInfo"]["rank"] == rank
        assert len(spans(trace, "cpu_op", "c10d::allreduce_")) == 2  # one per profiled call
    # rank 0 speaks for the job
    assert done.stdout.splitlines() == [
        "Written, a trace per rank (2 ranks) in each directory:", f"  {job}/",
        "Read one as a job:", f"  kerneltui summary {job}/",
    ]
    summary = subprocess.run([sys.executable, "-m", "kerneltui", "summary", f"{job}/", "--format", "json"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert summary.returncode == 0, summary.stderr
    ranks = json.loads(summary.stdout)
    assert (ranks["job"]["ranks"], ranks["job"]["world_size"]) == (2, 2)
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1]
