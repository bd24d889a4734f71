"""The synthetic multi-rank jobs (tests/support/rank_job.py) plant what their JobTruth says.

Checked from the JSON directly (orjson), not through kerneltui, so that a bug in the loader
cannot hide one in the generator.
"""

from __future__ import annotations

import gzip
import math
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.support.rank_job import TEMPLATE, make_job

GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
SYNCHRONISING = re.compile(r"nccl(?:Dev)?Kernel_(?:AllReduce|Broadcast|AllGather|ReduceScatter)")


def read(path: Path) -> dict:
    raw = path.read_bytes()
    return orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def ns(us: float) -> int:
    """Exactly: round(us * 1000) rounds once more and can be 1 ns off above 2^42 µs."""
    whole = math.floor(us)
    return whole * 1000 + round((us - whole) * 1000)


def timed(doc: dict) -> list[dict]:
    """The events in file order, metadata left out (the generator writes it once, at the end)."""
    return [e for e in doc["traceEvents"] if e.get("ph") != "M"]


def collectives(doc: dict, offset_ns: int) -> list[tuple[int, int]]:
    """(start, end) of each synchronising collective kernel, in time order, offset removed."""
    spans = [(ns(e["ts"]) - offset_ns, ns(e["ts"]) + ns(e["dur"]) - offset_ns) for e in doc["traceEvents"]
             if e.get("cat") == "kernel" and SYNCHRONISING.match(e["name"])]
    return sorted(spans)


def overlapping_pairs(events: list[dict]) -> set[tuple[int, int]]:
    """(i, j) of GPU work on one stream where j starts before i (earlier on that stream) ends."""
    streams: dict[tuple, list[int]] = {}
    for i, e in enumerate(events):
        if e.get("cat") in GPU_WORK:
            streams.setdefault((e["pid"], e["tid"]), []).append(i)
    pairs = set()
    for indices in streams.values():
        indices.sort(key=lambda i: ns(events[i]["ts"]))
        for a, i in enumerate(indices):
            end = ns(events[i]["ts"]) + ns(events[i]["dur"])
            for j in indices[a + 1:]:
                if ns(events[j]["ts"]) >= end:
                    break
                pairs.add((i, j))
    return pairs


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return make_job(tmp_path_factory.mktemp("job"), ranks=4, straggler=2)


@pytest.fixture(scope="module")
def docs(job):
    return [read(f) for f in job.files]


@pytest.fixture(scope="module")
def template_events():
    return timed(read(TEMPLATE))


def test_one_file_per_rank_naming_its_rank_and_the_world(job, docs):
    assert [f.name for f in job.files] == [f"worker{r}.pt.trace.json" for r in range(4)]
    assert [d["distributedInfo"]["rank"] for d in docs] == [0, 1, 2, 3]
    assert {d["distributedInfo"]["world_size"] for d in docs} == {4}
    assert all(f.read_bytes().count(b"\n") > len(d["traceEvents"]) for f, d in zip(job.files, docs))  # one a line


def group_sizes(doc: dict) -> set:
    return {e["args"]["Group size"] for e in doc["traceEvents"] if "Group size" in e.get("args", {})}


def test_a_disagreeing_world_size_is_written_as_given(tmp_path, docs):
    truth = make_job(tmp_path, ranks=2, world_size=3, straggler=None)
    written = [read(f) for f in truth.files]
    assert [d["distributedInfo"]["world_size"] for d in written] == [3, 3]
    # the world's group is the job's own, whatever world_size says, and each job's (the template is cached);
    # 1: the template also names single-rank groups, left as they are
    assert group_sizes(docs[0]) == {1, 4} and group_sizes(written[0]) == {1, 2}
    assert written[0]["distributedInfo"]["pg_config"][0]["ranks"] == [0, 1]


def test_every_timestamp_of_a_rank_moves_by_its_offset(job, docs):
    assert job.offsets_ns[0] == 0
    assert all(200_000 <= abs(o) <= 5_000_000 for o in job.offsets_ns[1:])
    first_kernel = [min(ns(e["ts"]) for e in d["traceEvents"] if e.get("cat") == "kernel") for d in docs]
    zero = [ns(e["ts"]) for e in docs[0]["traceEvents"]]
    for rank in (1, 3):  # not the straggler: its GPU work moved on purpose
        assert abs(first_kernel[rank] - first_kernel[0] - job.offsets_ns[rank]) <= 1000
        shifts = Counter(ns(e["ts"]) - z for e, z in zip(docs[rank]["traceEvents"], zero))
        assert set(shifts) <= {job.offsets_ns[rank] + d for d in (-1, 0, 1)}, shifts.most_common(3)


def test_the_straggler_arrives_late_and_leaves_with_the_others(job, docs):
    zero = collectives(docs[0], job.offsets_ns[0])
    late = collectives(docs[2], job.offsets_ns[2])
    assert len(zero) == len(late) == len(job.delay_ns) == 21
    assert all(d > 0 for d in job.delay_ns)
    for (s0, e0), (s, e), delay in zip(zero, late, job.delay_ns):
        assert abs(e - e0) <= 1
        assert abs(s - s0 - delay) <= 1
    assert collectives(docs[1], job.offsets_ns[1]) == pytest.approx(zero, abs=1)  # the others waited


def test_the_straggler_computes_longer_before_each_collective(job, docs, template_events):
    """The gap from the previous collective's end to this one's start grows by exactly delay_ns[i]."""
    template = collectives({"traceEvents": template_events}, 0)
    late = collectives(docs[2], job.offsets_ns[2])
    for i in range(1, len(late)):
        assert abs((late[i][0] - late[i - 1][1]) - (template[i][0] - template[i - 1][1]) - job.delay_ns[i]) <= 2


def test_no_gpu_work_overlaps_on_a_stream_where_it_did_not(docs, template_events):
    before = overlapping_pairs(template_events)
    for doc in docs:
        events = timed(doc)
        assert [e.get("name") for e in events] == [e.get("name") for e in template_events]  # same order
        assert overlapping_pairs(events) <= before


def test_jitter_never_lengthens_a_kernel(docs, template_events):
    for doc in (docs[0], docs[1]):
        durations = [(ns(e["dur"]), ns(t["dur"])) for e, t in zip(timed(doc), template_events)
                     if e.get("cat") == "kernel"]
        assert all(0.98 * old - 1 <= new <= old for new, old in durations)
        assert sum(new < old for new, old in durations) > len(durations) / 2


def test_same_seed_same_bytes(tmp_path):
    a = make_job(tmp_path / "a", ranks=2, straggler=1, seed=7)
    b = make_job(tmp_path / "b", ranks=2, straggler=1, seed=7)
    assert a.offsets_ns == b.offsets_ns and a.delay_ns == b.delay_ns
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a.files, b.files))


def test_replicated_gzipped_copies_keep_ids_unique_and_plant_every_copy(tmp_path, template_events):
    truth = make_job(tmp_path, ranks=2, straggler=1, target_bytes=16_000_000, gzip=True)
    assert [f.name for f in truth.files] == ["worker0.pt.trace.json.gz", "worker1.pt.trace.json.gz"]
    docs = [read(f) for f in truth.files]
    events = timed(docs[0])
    assert len(events) == 2 * len(template_events)
    kernels = [e["args"]["correlation"] for e in events if e.get("cat") == "kernel"]
    assert len(set(kernels)) == len(kernels)
    assert len(truth.delay_ns) == 42 and truth.delay_ns[:21] == truth.delay_ns[21:]
    zero, late = collectives(docs[0], 0), collectives(docs[1], truth.offsets_ns[1])
    assert all(abs(e - e0) <= 1 and abs(s - s0 - d) <= 1 for (s0, e0), (s, e), d in zip(zero, late, truth.delay_ns))
