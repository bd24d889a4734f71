"""`summary DIR --overview` and `summary DIR --memory`: a row per rank of a job.

The made job below is written event by event here, so that each figure is known by construction:
every rank runs two ProfilerSteps of 100 µs (rank 2, the straggler: 140 µs, a 60 µs CPU-only op
after its all-reduce), each step (µs from its start)

    0-1 other · 1-4 DataLoader op · 4-5 other · 5-8 memcpy · 8-10 other · 10-20 CPU-only (aten::mm, GPU idle)
    20-50 kernel · 50-70 all-reduce · 70-100 other      (rank 2: 70-130 CPU-only, 130-140 other)

so a step splits into kernel 30, memcpy 3, memset 0, comm 20, dataloader 3, cpu_only 10, other 34 µs
(rank 2: cpu_only 70, other 14 µs); GPU utilization 53 / 100 (rank 2: 53 / 140). Ranks 0 and 2 hold
[memory] events: rank 0 allocates 1,000 B and 4,000 B and frees the first (peak 5,000 B, 4,000 B never
freed), rank 2 allocates 8,000 B and frees it; rank 1 holds none.
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from kerneltui import cli
from tests.conftest import EXTERNAL_TRACES, shared_trace
from tests.support.rank_job import make_job

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
US = 1000  # ns
STEP = {"span_ns": 100 * US, "kernel_ns": 30 * US, "memcpy_ns": 3 * US, "memset_ns": 0, "comm_ns": 20 * US,
        "dataloader_ns": 3 * US, "cpu_only_ns": 10 * US, "other_ns": 34 * US}
SLOW_STEP = {**STEP, "span_ns": 140 * US, "cpu_only_ns": 70 * US, "other_ns": 14 * US}
MEMORY = {0: [(11, 1000, 1000, 0xA), (12, 4000, 5000, 0xB), (60, -1000, 4000, 0xA)],  # (µs, Bytes, Total Allocated, Addr)
          2: [(11, 8000, 8000, 0xC), (60, -8000, 0, 0xC)]}
RESERVED = {0: 2_097_152, 2: 4_194_304}


def _rank_trace(rank: int, world: int = 3, slow: bool = False) -> dict:
    events: list[dict] = []
    corr = 0

    def x(cat, name, ts, dur, pid=1, tid=1, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                       "args": args})

    def gpu(cat, name, ts, dur, launch_ts):
        nonlocal corr
        corr += 1
        x("cuda_runtime", "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel", launch_ts, 0.5,
          correlation=corr, cbid=211)
        x(cat, name, ts, dur, pid=0, tid=7, correlation=corr, stream=7, device=0)

    t = 1000.0
    for step in (1, 2):
        span = 140 if slow else 100
        x("user_annotation", f"ProfilerStep#{step}", t, span)
        x("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 1, 3)
        gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 5, 3, t + 4.2)
        x("cpu_op", "aten::mm", t + 10, 10)
        gpu("kernel", "ampere_sgemm_128x64_nn", t + 20, 30, t + 12)
        x("cpu_op", "c10d::allreduce_", t + 21, 2)
        gpu("kernel", NCCL, t + 50, 20, t + 21.5)
        if slow:
            x("cpu_op", "aten::item", t + 70, 60)
        if step == 1:
            for at, nbytes, total, addr in MEMORY.get(rank, ()):
                events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
                               "tid": 1, "ts": t + at, "args": {
                                   "Total Reserved": RESERVED[rank], "Total Allocated": total, "Bytes": nbytes,
                                   "Device Id": 0, "Device Type": 1, "Addr": addr}})
        t += 200
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "numSms": 132}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}, "traceEvents": events}


@pytest.fixture
def job(tmp_path):
    for rank in range(3):
        (tmp_path / f"worker{rank}.pt.trace.json").write_text(json.dumps(_rank_trace(rank, slow=rank == 2)))
    return tmp_path


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_each_rank_gets_its_mean_step_split_and_the_straggler_its_cause(job, capsys, monkeypatch):
    monkeypatch.setenv("KERNELTUI_RANK_WORKERS", "2")  # the worker processes, as summary DIR uses them
    code, out, err = run(capsys, "summary", str(job), "--overview", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2]
    for r in doc["ranks"]:
        o = r["overview"]
        assert r["path"].endswith(f"worker{r['rank']}.pt.trace.json") and r["error"] is None
        assert len(o["steps"]) == 2
        assert o["mean"] == pytest.approx(SLOW_STEP if r["rank"] == 2 else STEP, abs=1)
        assert o["gpu_utilization"] == pytest.approx(53 / (140 if r["rank"] == 2 else 100))
    s = doc["slowest"]
    assert (s["rank"], s["median_rank"], s["straggler"], s["mostly"]) == (2, 0, True, "cpu_only")
    assert s["excess_ns"] == pytest.approx(40 * US, abs=1) and s["excess_share"] == pytest.approx(0.4)
    assert s["parts_ns"] == pytest.approx({**{k: 0 for k in STEP if k != "span_ns"}, "cpu_only_ns": 60 * US,
                                           "other_ns": -20 * US}, abs=1)
    assert doc["findings"][0] == ("straggler: rank 2's mean step 140.0µs is 40.0µs (40.0%) longer than the median "
                                  "rank's (rank 0, 100.0µs); the difference by part: most from CPU-only time (the "
                                  "GPU idle while the CPU runs ops) (+60.0µs); offset by other −20.0µs")


def test_a_ranks_overview_is_the_one_summary_trace_gives(job, capsys):
    _, out, _ = run(capsys, "summary", str(job), "--overview", "--format", "json")
    for r in json.loads(out)["ranks"]:
        _, one, _ = run(capsys, "summary", r["path"], "--format", "json")
        assert r["overview"] == json.loads(one)["overview"]


def test_overview_table_csv_and_markdown(job, capsys):
    code, out, _ = run(capsys, "summary", str(job), "--overview")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "3 ranks of world_size 3 · NVIDIA H100"
    assert lines[3].split() == ["rank", "steps", "step", "kernel", "memcpy", "comm", "loader", "CPU-only", "other",
                                "GPU", "util"]
    assert lines[4].split() == ["0", "2", "100.0µs", "30.0µs", "3.00µs", "20.0µs", "3.00µs", "10.0µs", "34.0µs",
                                "53.0%"]
    assert lines[6].split() == ["2", "◀", "2", "140.0µs", "30.0µs", "3.00µs", "20.0µs", "3.00µs", "70.0µs", "14.0µs",
                                "37.9%"]
    assert lines[7] == "(memset: 0 on every rank, not shown)"
    assert max(map(len, lines)) <= 80 and "straggler: rank 2's mean step 140.0µs" in out
    _, out, _ = run(capsys, "summary", str(job), "--overview", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["rank"], r["span_ns"], r["cpu_only_ns"], r["other_ns"]) for r in rows] == [
        ("0", "100000", "10000", "34000"), ("1", "100000", "10000", "34000"), ("2", "140000", "70000", "14000")]
    _, out, _ = run(capsys, "summary", str(job), "--overview", "--format", "markdown")
    assert "| 2 ◀ | 2 | 140.0µs | 30.0µs | 3.00µs | 0 | 20.0µs | 3.00µs | 70.0µs | 14.0µs | 37.9% |" in out


def test_memory_per_rank_the_highest_peak_and_the_rank_without_events(job, capsys, monkeypatch):
    monkeypatch.setenv("KERNELTUI_RANK_WORKERS", "2")
    code, out, err = run(capsys, "summary", str(job), "--memory", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and err == ""
    by_rank = {r["rank"]: r["memory"] for r in doc["ranks"]}
    (d0,), (d2,) = by_rank[0]["devices"], by_rank[2]["devices"]
    assert (d0["peak_allocated_bytes"], d0["peak_reserved_bytes"], d0["allocations"], d0["frees"],
            d0["never_freed"], d0["never_freed_bytes"]) == (5000, 2_097_152, 2, 1, 1, 4000)
    assert (d2["peak_allocated_bytes"], d2["peak_reserved_bytes"], d2["allocations"], d2["never_freed_bytes"]) == (
        8000, 4_194_304, 1, 0)
    assert by_rank[1]["devices"] == [] and doc["without_memory_events"] == [1]
    assert doc["peak"] == {"rank": 2, "device": 0, "peak_allocated_bytes": 8000, "lowest_rank": 0, "lowest_device": 0,
                           "lowest_peak_allocated_bytes": 5000, "spread_bytes": 3000, "spread_share": 0.6}
    for r in doc["ranks"]:  # the per-trace document, as summary TRACE --format json has it
        _, one, _ = run(capsys, "summary", r["path"], "--format", "json")
        assert r["memory"] == json.loads(one)["memory"]
    code, out, _ = run(capsys, "summary", str(job), "--memory")
    lines = out.splitlines()
    assert lines[4].split() == ["0", "cuda:0", "5.0", "KB", "2.1", "MB", "2", "1", "4.0", "KB", "in", "1"]
    assert lines[5].split() == ["1", "no", "[memory]", "events"]
    assert lines[6].split() == ["2", "▲", "cuda:0", "8.0", "KB", "4.2", "MB", "1", "1", "0"]
    flat = " ".join(out.split())  # the findings wrap at 80 columns
    assert ("highest peak allocated: rank 2 (cuda:0) 8.0 KB, 3.0 KB (60.0%) above the lowest (rank 0, cuda:0, 5.0 KB)"
            in flat)
    assert "rank 1 has no [memory] events: capture them with `kerneltui capture --profile-memory`" in flat
    _, out, _ = run(capsys, "summary", str(job), "--memory", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["rank"], r["device"], r["peak_allocated_bytes"], r["note"]) for r in rows] == [
        ("0", "0", "5000", ""), ("1", "", "", "no [memory] events"), ("2", "0", "8000", "")]
    _, out, _ = run(capsys, "summary", str(job), "--memory", "--format", "markdown")
    assert "| 2 ▲ | cuda:0 | 8.0 KB | 4.2 MB | 1 | 1 | 0 |" in out


def test_failed_and_skipped_files_as_summary_dir_has_them(job, capsys):
    (job / "worker3.pt.trace.json").write_text("not json")  # a rank that failed
    (job / "notes.json").write_text('{"note": "not a trace"}')  # no rank at all: skipped
    plain_code, _, plain_err = run(capsys, "summary", str(job))
    assert plain_code == 2 and "skipped notes.json: is JSON but not a Chrome trace" in plain_err
    for flag in ("--overview", "--memory"):
        code, out, err = run(capsys, "summary", str(job), flag)
        assert (code, err) == (plain_code, plain_err)  # the same exit status and lines as summary DIR
        failed = [line for line in out.splitlines() if line.split()[:1] == ["3"]]
        assert len(failed) == 1 and failed[0].split()[1] == "failed:"
    code, out, _ = run(capsys, "summary", str(job), "--overview", "--format", "json")
    doc = json.loads(out)
    assert code == 2 and doc["ranks"][3]["overview"] is None and doc["ranks"][3]["error"]
    assert doc["skipped"] == [str(job / "notes.json")] and doc["slowest"]["rank"] == 2


def test_one_report_at_a_time(job, capsys):
    for extra in (["--memory"], ["--health"]):
        code, out, err = run(capsys, "summary", str(job), "--overview", *extra)
        assert code == 2 and out == "" and "each print one report" in err


def test_the_planted_straggler_computes_while_the_others_wait(tmp_path, capsys):
    """rank_job's straggler starts each collective half its length later and ends it with the others: its
    mean step is the others', its communication half theirs, and the collectives name it."""
    make_job(tmp_path, ranks=4, straggler=1, seed=3)
    code, out, _ = run(capsys, "summary", str(tmp_path), "--overview", "--format", "json")
    doc = json.loads(out)
    means = {r["rank"]: r["overview"]["mean"] for r in doc["ranks"]}
    others = [means[r]["comm_ns"] for r in (0, 2, 3)]
    assert code == 0 and len({round(m["span_ns"]) for m in means.values()}) == 1
    assert means[1]["comm_ns"] / (sum(others) / 3) == pytest.approx(0.5, abs=0.01)
    assert doc["stragglers"] == [1] and doc["slowest"]["straggler"] is False
    assert any(f.startswith("collectives: rank 1 reaches them") for f in doc["findings"])


def test_the_real_two_rank_hta_job(tmp_path, capsys):
    for r in (0, 1):
        shutil.copy(EXTERNAL_TRACES / f"hta__trace_filter__sampled_rank-{r}.json.gz", tmp_path)
    code, out, _ = run(capsys, "summary", str(tmp_path), "--overview", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [len(r["overview"]["steps"]) for r in doc["ranks"]] == [2, 2]
    assert [r["overview"]["mean"]["span_ns"] for r in doc["ranks"]] == [615_120_000, 619_271_500]
    for r in doc["ranks"]:
        _, one, _ = run(capsys, "summary", r["path"], "--format", "json")
        assert r["overview"] == json.loads(one)["overview"]
    s = doc["slowest"]
    assert (s["rank"], s["median_rank"], s["excess_ns"], s["straggler"]) == (1, 0, 4_151_500, False)
    code, out, _ = run(capsys, "summary", str(tmp_path), "--memory")
    assert code == 0 and "no rank has [memory] events: capture them with" in out


def test_two_ranks_of_the_real_gpt_step_with_memory_events(tmp_path, capsys):
    """The shared GPT step (1,992 CUDA [memory] events, peak 1,514,776,576 B: test_memory.py counts them from the
    JSON) as the two ranks of a job, numbered from their file names."""
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.json.gz").write_bytes(shared_trace("gpt_train_eager").read_bytes())
    code, out, _ = run(capsys, "summary", str(tmp_path), "--memory", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        (d,) = r["memory"]["devices"]
        assert (r["memory"]["events"], d["peak_allocated_bytes"], d["allocations"] + d["frees"]) == (
            1992, 1_514_776_576, 1992)
    assert (doc["peak"]["spread_bytes"], doc["without_memory_events"]) == (0, [])
    code, out, _ = run(capsys, "summary", str(tmp_path), "--memory")
    assert "peak allocated: 1.5 GB (1,514,776,576 B) on every rank's device alike" in out and "▲" not in out
