"""A multi-rank job: planted stragglers and clock offsets found, bad ranks reported, the CLI and Dask.

Jobs come from tests/support/rank_job.py: copies of a real A100 DDP rank trace with a planted
clock offset per rank, jittered kernels, and a straggler whose compute grows while its wait shrinks.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys

import orjson
import pytest

from kerneltui import cli
from kerneltui.analysis.ranks.job import summarize_job
from kerneltui.analysis.ranks.run import DASK_INSTALL
from tests.conftest import EXTERNAL_TRACES, SHARED_TRACES
from tests.support.rank_job import make_job

# Collective ends agree across ranks only to within a few µs; 10 µs either way on every rank
# (the smallest planted offset is 200 µs, so 10% of it is 20 µs).
NOISE = 10_000


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    out = tmp_path_factory.mktemp("eight")
    return out, make_job(out, ranks=8, straggler=5, seed=7, end_noise_ns=NOISE)


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("seed", range(4))
def test_the_planted_straggler_is_found_first_and_offsets_within_10_percent(tmp_path, seed):
    truth = make_job(tmp_path, ranks=8, straggler=seed + 1, seed=seed, end_noise_ns=NOISE)
    job = summarize_job([str(tmp_path)], cache=False)
    assert job.stragglers[:1] == [truth.straggler]
    assert job.matched == 21  # 15 all-reduces and 6 broadcasts, on every rank
    for rank, planted in enumerate(truth.offsets_ns):
        assert abs(job.offsets_ns[rank] - planted) <= 0.1 * abs(planted), (rank, job.offsets_ns[rank], planted)
    # the straggler arrives late by about the median planted delay; the others on time
    late = job.lateness_ns
    assert late[truth.straggler] > 0.5 * sorted(truth.delay_ns)[len(truth.delay_ns) // 2]
    assert all(abs(v) < NOISE for r, v in late.items() if r != truth.straggler)


def test_a_rank_whose_profiler_missed_the_first_collectives_still_lines_up(tmp_path, capsys):
    """Rank 1's trace lacks the first 2 broadcasts and 3 all-reduces (its profiler started late):
    matched by order from the first, every pair would be wrong; the shift search finds them."""
    truth = make_job(tmp_path, ranks=4, straggler=2, seed=5, end_noise_ns=NOISE)
    doc = orjson.loads(truth.files[1].read_bytes())
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    drop = [e for e in kernels if e["name"].startswith("ncclKernel_Broadcast")][:2]
    drop += [e for e in kernels if e["name"].startswith("ncclKernel_AllReduce")][:3]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not any(e is d for d in drop)]
    truth.files[1].write_bytes(orjson.dumps(doc))
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    result = json.loads(out)
    assert code == 0 and result["matched_collectives"] == 21 - 5
    for rank, planted in enumerate(truth.offsets_ns):
        assert abs(result["clock_offsets_ns"][str(rank)] - planted) <= 0.1 * abs(planted)
    assert result["stragglers"] == [2]
    assert ("kerneltui: the ranks hold 12 to 15 allreduce collectives in group 0 (a cut-off trace, or profilers"
            " started at different steps?): each rank's are lined up with the fullest rank's by their end times where"
            " enough overlap, else left out") in err.splitlines()


def test_no_straggler_is_claimed_when_none_was_planted(tmp_path):
    make_job(tmp_path, ranks=8, straggler=None, seed=3, end_noise_ns=NOISE)
    job = summarize_job([str(tmp_path)], cache=False)
    assert job.stragglers == []
    assert "no straggler: every rank reaches the 21 matched collectives within noise of the others" in \
        _findings(job)


def test_the_straggler_waits_least_and_computes_most(eight):
    directory, truth = eight
    job = summarize_job([str(directory)], cache=False)
    by_rank = {r.rank: r for r in job.ranks}
    s = by_rank[truth.straggler]
    others = [r for r in job.ranks if r.rank != truth.straggler]
    assert s.comm_ns < min(r.comm_ns for r in others)
    assert s.compute_ns > max(r.compute_ns for r in others)


def test_offsets_make_clock_artefacts_that_lining_up_removes(eight):
    directory, truth = eight
    job = summarize_job([str(directory)], cache=False)
    spread = max(truth.offsets_ns) - min(truth.offsets_ns)
    assert job.artefacts  # on raw clocks the collectives look longer by about the spread of the offsets
    for a in job.artefacts:
        assert a.raw_span_ns > 2 * a.aligned_span_ns
        assert a.raw_span_ns - a.aligned_span_ns <= spread + 1000


def test_summary_json_has_the_documented_fields(eight, capsys):
    directory, truth = eight
    code, out, err = run(capsys, "summary", str(directory), "--format", "json", "--no-cache")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["stragglers"][0] == truth.straggler
    assert [r["rank"] for r in doc["ranks"]] == list(range(8))
    for row in doc["ranks"]:
        assert {"rank", "step_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "clock_offset_ns"} <= set(row)
        assert row["exposed_comm_ns"] <= row["comm_ns"] <= row["busy_ns"]
        assert row["clock_offset_ns"] == pytest.approx(truth.offsets_ns[row["rank"]], abs=0.1 * abs(
            truth.offsets_ns[row["rank"]]))
    assert doc["job"]["ranks"] == 8 and doc["job"]["world_size"] == 8
    assert doc["job"]["busy_ns"] == sum(r["busy_ns"] for r in doc["ranks"])


def test_summary_table_csv_and_markdown(eight, capsys):
    directory, truth = eight
    code, out, _ = run(capsys, "summary", str(directory), "--no-cache")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "8 ranks of world_size 8 · NVIDIA A100-PG509-200"
    assert lines[1].startswith("step ") and "(slowest rank) · communication " in lines[1]
    assert lines[3].split() == ["rank", "step", "busy", "compute", "comm", "exposed", "idle", "offset", "late"]
    marked = [line.split()[0] for line in lines[4:12] if line.split()[1] == "◀"]
    assert marked == [str(truth.straggler)] and "◀ straggler" in lines
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith(f"straggler: rank {truth.straggler} reaches the collectives") for line in lines)
    code, out, _ = run(capsys, "summary", str(directory), "--format", "csv")
    assert out.splitlines()[0].startswith("rank,device,steps,step_ns,busy_ns,compute_ns,comm_ns,exposed_comm_ns")
    assert len(out.splitlines()) == 9
    code, out, _ = run(capsys, "summary", str(directory), "--format", "markdown")
    assert out.splitlines()[0] == "**8 ranks of world_size 8 · NVIDIA A100-PG509-200**"
    assert out.splitlines()[1].startswith("step ") and out.splitlines()[2] == ""
    assert out.splitlines()[3] == "| rank | step | busy | compute | comm | exposed | idle | offset | late |"
    assert f"- straggler: rank {truth.straggler} " in out


def test_one_rank_says_what_it_cannot_do(tmp_path, capsys):
    make_job(tmp_path, ranks=1, straggler=None, seed=0)
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["stragglers"] == [] and doc["clock_offsets_ns"] is None
    assert "kerneltui: one rank: clock offsets, lateness and stragglers need at least two" in err.splitlines()


def test_world_size_that_disagrees_with_the_files(tmp_path, capsys):
    make_job(tmp_path, ranks=3, straggler=None, seed=0, world_size=16)
    code, _, err = run(capsys, "summary", str(tmp_path))
    assert code == 0
    assert "kerneltui: world_size is 16 but 3 rank files were found: the job figures cover those 3" in err.splitlines()


def test_one_rank_file_of_a_bigger_world_reads_in_the_singular(tmp_path, capsys):
    make_job(tmp_path, ranks=1, straggler=None, seed=0, world_size=2)
    code, out, err = run(capsys, "summary", str(tmp_path))
    assert out.splitlines()[0] == "1 rank of world_size 2 · NVIDIA A100-PG509-200"
    assert "kerneltui: world_size is 2 but 1 rank file was found: the job figures cover that one" in err.splitlines()


def test_traces_without_distributed_info_are_numbered_by_file_order(tmp_path, capsys):
    for name in ("add_relu_1M_eager", "mlp_bf16_eager"):
        shutil.copy(SHARED_TRACES / f"{name}.json.gz", tmp_path)
        shutil.copy(SHARED_TRACES / f"{name}.truth.json", tmp_path)  # siblings that are not ranks
    (tmp_path / "add_relu.provenance.json").write_text('{"version": 1, "kernels": []}')
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["path"].rsplit("/", 1)[1] for r in doc["ranks"]] == ["add_relu_1M_eager.json.gz", "mlp_bf16_eager.json.gz"]
    assert doc["clock_offsets_ns"] is None and all(r["comm_ns"] == 0 for r in doc["ranks"])
    assert err.splitlines() == [
        "kerneltui: 2 of 2 files say no rank (no distributedInfo, no rank in the name): numbered by file order",
        ("kerneltui: no collective kernels on any rank (compute only): nothing to line the clocks up with, ranks are"
         " shown on their own clocks"),
    ]


def test_a_corrupt_and_a_cut_off_rank_are_reported_and_the_others_summarised(tmp_path, capsys):
    truth = make_job(tmp_path, ranks=4, straggler=None, seed=2)
    truth.files[1].write_bytes(b"\x00garbage")
    text = truth.files[2].read_bytes()
    truth.files[2].write_bytes(text[: len(text) * 2 // 3])
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 2  # not every rank is whole
    rows = {r["rank"]: r for r in doc["ranks"]}
    assert rows[1]["error"] and rows[1]["busy_ns"] == 0
    assert rows[0]["error"] is None and rows[3]["busy_ns"] > 0 and rows[2]["busy_ns"] > 0
    assert doc["job"]["failed"] == 1 and doc["job"]["ranks"] == 3
    lines = err.splitlines()
    assert any(line.startswith("kerneltui: rank 1: ") and line.endswith("(the other ranks are summarised)")
               for line in lines)
    assert any(line.startswith("kerneltui: rank 2: trace is cut off") for line in lines)
    assert "Traceback" not in err


def test_a_rank_cut_in_half_gets_no_offset_rather_than_a_wrong_one(tmp_path, capsys):
    """Found by an independent count: cut off, rank 1 keeps the first broadcasts and the last
    all-reduces (Kineto's file order is not time order); paired by order they gave +246 ms."""
    truth = make_job(tmp_path, ranks=8, straggler=6, seed=11, end_noise_ns=NOISE)
    text = truth.files[1].read_bytes()
    truth.files[1].write_bytes(text[: len(text) // 2])
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 2
    offsets = doc["clock_offsets_ns"]
    assert offsets.get("1") is None or abs(offsets["1"] - truth.offsets_ns[1]) <= 0.1 * abs(truth.offsets_ns[1])
    for rank in (0, 2, 3, 4, 5, 6, 7):
        assert abs(offsets[str(rank)] - truth.offsets_ns[rank]) <= 0.1 * abs(truth.offsets_ns[rank] or 1)
    assert doc["stragglers"] == [6]
    assert not any("246" in f for f in doc["findings"])


def test_a_rank_with_no_events_is_a_failed_rank(tmp_path, capsys):
    truth = make_job(tmp_path, ranks=3, straggler=None, seed=0)
    truth.files[2].write_bytes(b'{"traceEvents": []}')
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 2 and doc["job"]["failed"] == 1
    assert doc["ranks"][2]["error"].endswith("no events in this trace: nothing to summarise")
    assert doc["job"]["step_ns_mean"] == doc["ranks"][0]["step_ns"]  # not averaged with a zero
    assert "different devices" not in err and "say no rank" not in err


def test_mixed_devices_are_named(tmp_path, capsys):
    truth = make_job(tmp_path, ranks=2, straggler=None, seed=0)
    doc = orjson.loads(truth.files[1].read_bytes())
    doc["deviceProperties"][0]["name"] = "NVIDIA H100 80GB HBM3"
    truth.files[1].write_bytes(orjson.dumps(doc))
    code, _, err = run(capsys, "summary", str(tmp_path))
    assert code == 0
    assert ("kerneltui: the ranks ran on different devices (NVIDIA A100-PG509-200: 1, NVIDIA H100 80GB HBM3: 1):"
            " compare their times with care") in err.splitlines()


def test_an_empty_directory_and_every_rank_failing_are_one_line(tmp_path, capsys):
    assert run(capsys, "summary", str(tmp_path))[0] == 2
    (tmp_path / "a.json").write_text("not json")
    (tmp_path / "b.json").write_text("")
    code, out, err = run(capsys, "summary", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("kerneltui: no rank of this job could be read: ")


def test_the_real_two_rank_hta_job(tmp_path, capsys):
    for r in (0, 1):
        shutil.copy(EXTERNAL_TRACES / f"hta__trace_filter__sampled_rank-{r}.json.gz", tmp_path)
    code, out, err = run(capsys, "summary", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["job"]["world_size"] == 128 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["collectives"] for r in doc["ranks"]] == [10, 10]  # SendRecv only: nothing ends together
    assert doc["clock_offsets_ns"] is None and doc["stragglers"] == []
    assert err.splitlines() == [
        "kerneltui: world_size is 128 but 2 rank files were found: the job figures cover those 2",
        ("kerneltui: no synchronising collective (all-reduce, all-gather, reduce-scatter, broadcast) lines up across"
         " ranks: clock offsets unknown, ranks are shown on their own clocks"),
    ]


def test_dask_local_cluster_gives_the_same_json(eight, capsys):
    pytest.importorskip("distributed")
    directory, _ = eight
    local = run(capsys, "summary", str(directory), "--format", "json")[1]
    code, on_dask, _ = run(capsys, "summary", str(directory), "--format", "json", "--scheduler", "local")
    assert code == 0 and on_dask == local


def test_a_running_scheduler_by_address_gives_the_same_json(eight, capsys):
    distributed = pytest.importorskip("distributed")
    directory, _ = eight
    local = run(capsys, "summary", str(directory), "--format", "json")[1]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        code, on_dask, _ = run(capsys, "summary", str(directory), "--format", "json",
                               "--scheduler", cluster.scheduler_address)
    assert code == 0 and on_dask == local


def test_without_dask_the_scheduler_says_how_to_install_it(eight, capsys, monkeypatch):
    directory, _ = eight
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    code, out, err = run(capsys, "summary", str(directory), "--scheduler", "local")
    assert code == 2 and out == "" and err == f"kerneltui: {DASK_INSTALL}\n"


def test_an_unreachable_scheduler_is_one_line(eight, capsys):
    pytest.importorskip("distributed")
    directory, _ = eight
    code, _, err = run(capsys, "summary", str(directory), "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and err.startswith("kerneltui: --scheduler tcp://127.0.0.1:9: cannot reach the Dask scheduler")
    assert len(err.splitlines()) == 1


def test_a_malformed_scheduler_address_is_one_line(eight, capsys):
    pytest.importorskip("distributed")
    directory, _ = eight
    code, _, err = run(capsys, "summary", str(directory), "--scheduler", "foo")
    assert code == 2
    assert err == ("kerneltui: --scheduler foo: cannot reach the Dask scheduler (missing port number in address"
                   " 'foo')\n")


def test_one_trace_options_are_refused_for_a_job(eight, capsys):
    directory, _ = eight
    code, _, err = run(capsys, "summary", str(directory), "--top", "3")
    assert code == 2 and "for one trace, not a job" in err


def test_diff_of_two_jobs_and_of_one_rank(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    make_job(a, ranks=4, straggler=None, seed=1)
    make_job(b, ranks=4, straggler=2, seed=1)
    code, out, _ = run(capsys, "diff", str(a), str(b), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["b"]["stragglers"] == [2] and doc["a"]["stragglers"] == []
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    assert "stragglers: A none → B 2" in doc["findings"]
    two = next(r for r in doc["ranks"] if r["rank"] == 2)
    assert two["comm_ns_b"] < two["comm_ns_a"]  # the straggler waits less in B
    code, out, _ = run(capsys, "diff", str(a), str(b), "--rank", "2", "--format", "json")
    assert code == 0 and json.loads(out)["a"]["path"].endswith("worker2.pt.trace.json")
    code, _, err = run(capsys, "diff", str(a), str(b), "--rank", "9")
    assert code == 2 and err == f"kerneltui: {a}: no rank 9 in this job\n"
    code, _, err = run(capsys, "diff", str(a), str(SHARED_TRACES / "mlp_bf16_eager.json.gz"))
    assert code == 2 and "is a directory, the other is not" in err


def _findings(job):
    from kerneltui.ranks_report import findings

    return findings(job)


def test_gzipped_rank_files(tmp_path):
    truth = make_job(tmp_path, ranks=3, straggler=1, seed=4, gzip=True)
    for f in truth.files:
        with gzip.open(f) as text:
            assert f.name.endswith(".json.gz") and text.read(1) == b"{"
    assert summarize_job([str(tmp_path)], cache=False).stragglers == [1]


def test_a_worker_that_dies_is_one_line_not_a_traceback(eight, capsys, monkeypatch):
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from kerneltui.analysis.ranks import run as ranks_run

    class DyingPool:  # what ProcessPoolExecutor hands back when the OOM killer takes a worker
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args):
            future = Future()
            future.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
            return future

    monkeypatch.setattr(ranks_run, "ProcessPoolExecutor", DyingPool)
    monkeypatch.setenv("KERNELTUI_RANK_WORKERS", "2")
    directory, _ = eight
    code, out, err = run(capsys, "summary", str(directory))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("kerneltui: a worker reading ") and "KERNELTUI_RANK_WORKERS=1" in err
