"""Per-kernel counts and device times equal torch's own key_averages() on every real trace."""

from __future__ import annotations

import pytest

from kerneltui.trace import Kind, load_trace
from kerneltui.trace.summary import kernel_stats
from tests.conftest import shared_trace, shared_trace_names, truth

TRACES = shared_trace_names()


def cuda_rows_without_annotations(name: str, trace) -> dict[str, tuple[int, float]]:
    """torch's CUDA rows, less the GPU annotation spans it also lists as CUDA (doc section 3)."""
    ev = trace.events
    annotation_names = set(trace.names_of(ev["name"].to_numpy()[(ev["kind"] == Kind.GPU_ANNOTATION).to_numpy()]))
    annotation_names |= {"ProfilerStep*"}
    rows = {}
    for row in truth(name)["key_averages"]:
        if row["device_type"] == "DeviceType.CUDA" and row["key"] not in annotation_names:
            rows[row["key"]] = (row["count"], row["self_device_time_total_us"])
    return rows


@pytest.mark.parametrize("name", TRACES)
def test_kernel_counts_and_times_equal_torch(name):
    trace = load_trace(shared_trace(name))
    expected = cuda_rows_without_annotations(name, trace)
    stats = kernel_stats(trace)
    # torch merges Triton kernels of the same name (different kernel_hash): so do we, for the comparison
    ours = stats.groupby("full_name").agg(count=("count", "sum"), total_ns=("total_ns", "sum"))
    assert set(ours.index) == set(expected)
    for key, (count, total_us) in expected.items():
        assert ours.loc[key, "count"] == count, key
        assert ours.loc[key, "total_ns"] / 1e3 == pytest.approx(total_us, abs=0.01), key


@pytest.mark.parametrize("name", TRACES)
def test_gpu_time_total_equals_torch_device_event_total(name):
    trace = load_trace(shared_trace(name))
    expected = cuda_rows_without_annotations(name, trace)
    assert trace.gpu["dur"].sum() / 1e3 == pytest.approx(sum(t for _, t in expected.values()), abs=0.01)
    assert len(trace.gpu) == sum(c for c, _ in expected.values())


def test_every_truth_trace_is_tested():
    # tests/data/traces: 15 traces with truth files (13, then the resnet18_train_{eager,compiled} pair)
    assert len(TRACES) == 15
    assert {"resnet18_train_eager", "resnet18_train_compiled", "gpt_train_eager"} <= set(TRACES)
