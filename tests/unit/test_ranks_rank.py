"""One rank's summary against a count made here straight from the trace JSON, and collective recognition."""

from __future__ import annotations

import gzip
from decimal import Decimal

import orjson
import pytest

from kerneltui.analysis.ranks.collectives import (
    kind_of_name,
    kind_of_record,
    message_bytes,
)
from kerneltui.analysis.ranks.rank import summarize_rank_file
from tests.conftest import EXTERNAL_TRACES, SHARED_TRACES, shared_trace_names

NCCL_DDP = EXTERNAL_TRACES / "hta__nccl_parser_config__nccl_data.json.gz"
SAMPLED = [EXTERNAL_TRACES / f"hta__trace_filter__sampled_rank-{r}.json.gz" for r in (0, 1)]
B200 = EXTERNAL_TRACES / "tracelens__b200__eager_trace.json.gz"
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def ns(us) -> int:
    return int(Decimal(repr(us)) * 1000)  # exact for Kineto's 3-decimal µs


def union(intervals) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def count_from_json(path, is_comm):
    with gzip.open(path) as f:
        doc = orjson.loads(f.read())
    gpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    spans = [(ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)), is_comm(e["name"])) for e in gpu]
    busy = union((s, e) for s, e, _ in spans)
    compute = union((s, e) for s, e, c in spans if not c)
    comm = union((s, e) for s, e, c in spans if c)
    window = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    return {"busy_ns": busy, "compute_ns": compute, "comm_ns": comm, "exposed_comm_ns": busy - compute,
            "idle_ns": window - busy, "window_ns": window, "collectives": sum(c for *_, c in spans)}


@pytest.mark.parametrize("path", [NCCL_DDP, *SAMPLED, B200], ids=lambda p: p.name[:40])
def test_rank_figures_equal_a_count_from_the_json(path):
    def is_comm(name: str) -> bool:
        return name.startswith(("ncclKernel_", "ncclDevKernel_")) or "multimem_all_reduce_kernel" in name

    expected = count_from_json(path, is_comm)
    s = summarize_rank_file(str(path), cache=False)
    got = {k: getattr(s, k) for k in expected if k != "collectives"} | {"collectives": len(s.collectives)}
    assert got == expected


def test_the_ddp_rank_names_its_collectives_sizes_and_group():
    s = summarize_rank_file(str(NCCL_DDP), cache=False)
    assert (s.rank, s.rank_from, s.world_size, s.backend) == (0, "distributedInfo", 2, "nccl")
    kinds = list(s.collectives.kind)
    assert kinds.count("allreduce") == 15 and kinds.count("broadcast") == 6
    assert set(s.collectives.group) == {"0"}
    # the first all-reduce's record: 6,637,568 floats... in time order the first is a broadcast
    first_allreduce = kinds.index("allreduce")
    assert s.collectives.nbytes[first_allreduce] > 0
    assert all(s.collectives.end > s.collectives.start)
    assert s.steps == 3


def test_message_bytes_from_a_record():
    assert message_bytes({"in_nelems": 6637568, "out_nelems": 6637568, "dtype": "Float"}) == 6637568 * 4
    assert message_bytes({"in_nelems": 25136, "out_nelems": 201088, "dtype": "BFloat16"}) == 201088 * 2
    assert message_bytes({"in_nelems": 10, "dtype": "Complex"}) is None  # a dtype it does not know: unknown
    assert message_bytes({"dtype": "Float"}) is None


@pytest.mark.parametrize("name, kind", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "allreduce"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "broadcast"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reducescatter"),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce"),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "collective"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
     "allreduce"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)", "allreduce"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>()", None),
    ("triton_per_fused_native_layer_norm_0", None),
    ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", None),
])
def test_collective_kernels_by_name(name, kind):
    assert kind_of_name(name) == kind


def test_recorded_collective_names():
    assert kind_of_record("allreduce") == "allreduce"
    assert kind_of_record("_allgather_base") == "allgather"
    assert kind_of_record("reduce_scatter_tensor_coalesced") == "reducescatter"
    assert kind_of_record("barrier") == "allreduce"
    assert kind_of_record(7) is None and kind_of_record("gather") is None


@pytest.mark.parametrize("name", shared_trace_names())
def test_single_gpu_traces_have_no_communication(name):
    s = summarize_rank_file(str(SHARED_TRACES / f"{name}.json.gz"), cache=False)
    assert len(s.collectives) == 0 and s.comm_ns == 0 and s.exposed_comm_ns == 0
    assert s.compute_ns == s.busy_ns and s.rank is None and s.rank_from == ""
