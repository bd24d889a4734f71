"""`summary --health`, the health line and section of `summary`, damaged ranks of a job, overlaps in rows."""

from __future__ import annotations

import copy
import gzip
import json

import numpy as np
import pytest

from kerneltui.analysis.ranks.job import job_of
from kerneltui.analysis.ranks.rank import summarize_rank
from kerneltui.trace import load_trace
from kerneltui.tui.lanes import lanes_from_trace, stacked_rows
from tests.conftest import DATA
from tests.unit.test_cli_summary import kerneltui

OLD = "tests/data/external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"
RESNET = "tests/data/traces/resnet18_train_eager.json.gz"


def test_health_of_a_clean_trace_exits_0():
    result = kerneltui("summary", "--health", "traces/add_relu_1M_eager.json.gz")
    assert (result.returncode, result.stdout, result.stderr) == (0, "traces/add_relu_1M_eager.json.gz\nhealthy\n", "")


def test_health_lists_what_changes_no_figure():
    result = kerneltui("summary", "--health", RESNET)
    assert result.returncode == 0
    assert result.stdout == (
        f"{RESNET}\n"
        "healthy\n"
        "listed:\n"
        "  overlap_pdl        8 GPU events (1.1%), 39.7µs GPU\n"
        "                     8 overlaps of up to 1.25µs explained by programmatic\n"
        "                     dependent launch\n"
        "  empty_launch       2 launches (0.3%)\n"
        "                     2 copy or fill calls made no GPU event (a zero-byte copy or\n"
        "                     fill runs nothing, and no kernel launch lost its kernel)\n"
    )


def test_health_of_a_damaged_trace_exits_4():
    result = kerneltui("summary", "--health", OLD)
    assert result.returncode == 4
    assert result.stdout.splitlines()[1:4] == [
        "NOT HEALTHY: 1 cause changes figures (marked in summary, open and diff)",
        "  no_launch          733 GPU events (7.3%), 35.17ms GPU",
        "                     7.3% of GPU events (733) have no launch call (all at the",
    ]
    assert result.stdout.splitlines()[-4:] == [
        "listed, figures unchanged:",
        "  below_resolution   292 GPU events (2.9%), 0.00µs GPU",
        "                     292 GPU events last under the trace's 1 µs resolution and",
        "                     read as 0",
    ]


def test_health_json_and_csv():
    result = kerneltui("summary", "--health", "--format", "json", OLD)
    doc = json.loads(result.stdout)
    assert (result.returncode, doc["ok"], doc["gpu_events"], doc["launches"]) == (4, False, 10015, 9282)
    assert [(c["cause"], c["events"], c["gpu_ns"], c["changes_figures"]) for c in doc["causes"]] == [
        ("below_resolution", 292, 0, False), ("no_launch", 733, 35_170_000, True)]
    csv_out = kerneltui("summary", "--health", "--format", "csv", OLD).stdout.splitlines()
    assert csv_out[0] == "path,ok,cause,events,unit,share,gpu_ns,changes_figures,steps,affects"
    assert csv_out[2].startswith(f"{OLD},False,no_launch,733,GPU events,0.0731902146779830")


def test_only_health_changes_the_exit_status_and_a_missing_file_is_still_2():
    assert kerneltui("summary", OLD).returncode == 0  # damaged, but the summary itself succeeded
    missing = kerneltui("summary", "--health", "no/such/trace.json")
    assert missing.returncode == 2 and missing.stdout == ""
    assert kerneltui("summary", "--health", "--top", "3", OLD).returncode == 2  # a usage error


def test_summary_says_health_and_marks_what_it_touches():
    result = kerneltui("summary", OLD)
    lines = result.stdout.splitlines()
    assert lines[7:9] == [
        "health      NOT HEALTHY: 7.3% of GPU events (733) have no launch call (all at",
        "            the start: launched before the profiler started): their op and",
    ]
    doc = json.loads(kerneltui("summary", "--format", "json", OLD).stdout)
    assert doc["health"]["ok"] is False
    assert [s["health"] for s in doc["summary"]["per_iteration"]] == [["no_launch"], [], [], [], [], []]
    # a kernel whose launches are lost: its op is unknown for those
    adds = [k for k in doc["kernels"] if k["short"] == "vectorized_elementwise_kernel<AddFunctor>[f32]"][0]
    assert (adds["no_launch"], adds["count"]) == (399, 3489)


def test_a_kernel_whose_launches_are_all_lost_says_so_in_the_table(tmp_path):
    doc = json.loads(gzip.open(DATA / "traces/add_relu_1M_eager.json.gz").read())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "cudaLaunchKernel"]
    path = tmp_path / "lost.json"
    path.write_text(json.dumps(doc))
    out = kerneltui("summary", str(path)).stdout
    # the kernels' External ids still name their ops: only the source line is lost
    assert "  aten::add                         1" in out
    assert ("health      NOT HEALTHY: 100.0% of GPU events (2) have no launch call: their\n"
            "            source line is unknown (their op is known from its External id)\n") in out
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            del e["args"]["External id"]  # as torch 1.8 wrote the kernels it could not link
    path.write_text(json.dumps(doc))
    out = kerneltui("summary", str(path)).stdout
    assert "  ? no launch call (1 of 1)" in out
    assert "have no launch call: their op\n            and source line are unknown" in out


# -- a job with a damaged rank ---------------------------------------------------------------------

def test_a_damaged_rank_is_marked_and_never_called_the_straggler(tmp_path):
    ranks = []
    for r in (0, 1):
        doc = json.loads(gzip.open(DATA / f"external/hta__trace_filter__sampled_rank-{r}.json.gz").read())
        if r == 1:
            runtime = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cuda_runtime"]
            dropped = set(runtime[::5])
            doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in dropped]
        path = tmp_path / f"rank-{r}.json"
        path.write_text(json.dumps(doc))
        ranks.append(summarize_rank(load_trace(path, cache=False)))
    assert (ranks[0].health["ok"], ranks[1].health["ok"]) == (True, False)
    job = job_of(ranks)
    assert job.damaged == [1]
    out = kerneltui("summary", str(tmp_path))
    assert " 1 ⚠  619.27ms" in out.stdout and "⚠ damaged trace" in out.stdout
    assert "damaged: rank 1's trace: 20.0% of GPU events (231) have no launch call" in " ".join(out.stdout.split())
    health = kerneltui("summary", "--health", str(tmp_path))
    assert health.returncode == 4
    assert health.stdout.splitlines()[0].endswith("rank-0.json: healthy")


def test_a_late_rank_with_a_damaged_trace_is_not_the_straggler():
    from dataclasses import replace

    from kerneltui.analysis.ranks.rank import Collectives, RankSummary

    def rank(i: int, late: int, ok: bool) -> RankSummary:
        starts = np.arange(10, dtype=np.int64) * 1_000_000 + late
        ends = (np.arange(10, dtype=np.int64) + 1) * 1_000_000 - 10_000  # the collectives end together
        coll = Collectives(np.full(10, "allreduce", object), np.full(10, "", object), np.arange(10), starts, ends,
                           np.full(10, 1024))
        return RankSummary(path=f"rank-{i}.json", rank=i, rank_from="file name", world_size=4, backend="nccl",
                           device="H200", collectives=coll, health={"ok": ok, "line": "healthy" if ok else
                                                                     "NOT HEALTHY: 9 GPU events appear twice"})

    healthy = [rank(0, 0, True), rank(1, 0, True), rank(2, 0, True), rank(3, 600_000, True)]
    assert job_of(healthy).stragglers == [3]
    damaged = [*healthy[:3], replace(healthy[3], health={"ok": False, "line": "NOT HEALTHY: 9 GPU events appear twice"})]
    job = job_of(damaged)
    assert (job.stragglers, job.damaged, job.damaged_late) == ([], [3], [3])


# -- overlaps drawn in rows of their own -----------------------------------------------------------

def test_stacked_rows_first_fit():
    starts, ends = np.array([0, 1, 5, 6, 20]), np.array([10, 3, 7, 8, 21])
    assert [r.tolist() for r in stacked_rows(starts, ends)] == [[0, 4], [1, 2], [3]]
    assert [r.tolist() for r in stacked_rows(np.array([0, 5]), np.array([5, 9]))] == [[0, 1]]  # touching: one row


def test_a_pdl_chain_takes_two_rows_and_a_31_year_kernel_one_more():
    starts = np.arange(6) * 10
    assert [len(r) for r in stacked_rows(starts, starts + 11)] == [3, 3]  # each starts 1 before the last ends
    starts = np.arange(50_000, dtype=np.int64) * 10
    ends = starts + 5
    ends[0] = 10**18
    assert [len(r) for r in stacked_rows(starts, ends)] == [1, 49_999]  # peeled: no loop per event


@pytest.mark.parametrize("name", ["traces/resnet18_train_eager.json.gz", "external/tracelens__b200__eager_trace.json.gz"])
def test_no_lane_draws_two_events_on_top_of_each_other(name):
    lanes = [lane for lane in lanes_from_trace(load_trace(DATA / name), op_depths=0) if lane.key.startswith("gpu")]
    for lane in lanes:
        assert (lane.starts[1:] >= np.maximum.accumulate(lane.ends)[:-1]).all(), lane.key
    assert sum(len(lane) for lane in lanes) == len(load_trace(DATA / name).gpu)
    assert len(lanes) == 2  # stream 7 and one row for the kernels PDL started early


def test_a_shifted_kernel_gets_a_row_of_its_own(tmp_path):
    doc = json.loads(gzip.open(DATA / "traces/gpt_train_eager.json.gz").read())
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    a, b = kernels[300], kernels[301]
    b["ts"] = a["ts"] + a["dur"] / 2
    moved = copy.deepcopy(b)
    path = tmp_path / "shift.json"
    path.write_text(json.dumps(doc))
    lanes = lanes_from_trace(load_trace(path, cache=False), op_depths=0)
    assert [(lane.label, len(lane)) for lane in lanes if lane.key.startswith("gpu")] == [("GPU0 s7", 944),
                                                                                       ("GPU0 s7 +1", 1)]
    assert moved["name"]  # the row holds the moved kernel
