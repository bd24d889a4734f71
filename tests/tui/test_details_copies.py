"""The details pane of a memcpy: which way it copied, and its bandwidth against the link it crossed."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.schema import Kind
from kerneltui.tui.details import launch_details
from kerneltui.tui.model import build_kernels
from tests.conftest import external_trace, shared_trace
from tests.tui.helpers import browse_of


def memcpy_details(path):
    kernels = build_kernels(load_trace(path))
    browse = browse_of(kernels)
    g = kernels.trace.gpu
    launches = np.flatnonzero(g["kind"].to_numpy() == Kind.MEMCPY)
    return kernels, browse, {int(i): launch_details(kernels, browse, int(i)) for i in launches}


def test_a_pinned_host_to_device_copy_is_rated_against_pcie():
    kernels, browse, details = memcpy_details(shared_trace("gpt_train_eager"))
    assert len(details) == 6
    first, d = next(iter(details.items()))
    assert str(kernels.trace.gpu["full_name"].iat[first]) == "Memcpy HtoD (Pinned -> Device)"
    assert d.value("kind") == "memcpy H2D (pinned)"
    row = browse.analyses.traffic.iloc[first]
    assert row["link_gbs"] == 64.0
    assert d.value("bandwidth") == f"{row['gbs']:.1f} GB/s, {row['link_share']:.1%} of the host link (PCIe Gen5 x16, 64.0 GB/s)"
    assert d.value("bandwidth") == "10.9 GB/s, 17.0% of the host link (PCIe Gen5 x16, 64.0 GB/s)"
    assert all("H200 peak" not in v for d in details.values() for _, v in d.rows)
    # before the second loading stage the kind is already known (from the copy's name)
    assert launch_details(kernels, None, first).value("kind") == "memcpy H2D (pinned)"


def test_a_device_to_device_copy_keeps_the_hbm_rating():
    _, browse, details = memcpy_details(shared_trace("resnet18_train_eager"))
    launch, d = next(iter(details.items()))
    assert d.value("kind") == "memcpy D2D"
    assert d.value("bandwidth") == "110.6 GB/s, 2.3% of H200 peak"
    assert browse.analyses.traffic.iloc[launch]["bytes"] == 2 * 65_536  # read and written


def test_pageable_copies_and_an_unknown_device():
    _, _, details = memcpy_details(external_trace("hta__trace_filter__sampled_rank-1.json.gz"))
    kinds = {d.value("kind") for d in details.values()}
    assert kinds == {"memcpy D2H (pageable)", "memcpy H2D (pageable)", "memcpy H2D (pinned)", "memcpy D2D"}
    host = [d for d in details.values() if "H2D" in d.value("kind") or "D2H" in d.value("kind")]
    assert host and all("host link peak unknown" in d.value("bandwidth") for d in host)


@pytest.mark.parametrize("name,expected", [("tracelens__b200__eager_trace.json.gz", "of the host link (PCIe Gen5 x16")])
def test_b200_host_copies(name, expected):
    _, _, details = memcpy_details(external_trace(name))
    kinds = {d.value("kind") for d in details.values()}
    assert {"memcpy H2D (pinned)", "memcpy H2D (pageable)", "memcpy D2D"} <= kinds
    assert all(expected in d.value("bandwidth") for d in details.values() if "H2D" in d.value("kind"))
    assert all("of B200 peak" in d.value("bandwidth") for d in details.values() if d.value("kind") == "memcpy D2D")
