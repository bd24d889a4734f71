"""A name millions of characters long (a hostile or broken trace) costs its own size, not that times every row.

numpy's fixed-width strings (``.astype(str)``, ``np.char``) are as wide as the longest name on
every row: a 2M-character name in a 5 MB trace once made a summary peak at 3.1 GB (fuzz mutant
282, long_names). Where names are compared, sorted or joined, kerneltui keeps Python strings.
"""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
from contextlib import redirect_stdout

import numpy as np

from kerneltui.cli import main
from kerneltui.tui.widgets.table import lowered
from tests.conftest import shared_trace

LONG = 2 * 1024 * 1024


def test_a_summary_of_a_trace_with_a_two_million_character_name_stays_small(tmp_path):
    doc = json.loads(gzip.decompress(shared_trace("gpt_train_eager").read_bytes()))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["name"] = "x" * LONG  # a CPU op and a kernel, as the fuzz mutant had them
    next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")["name"] = "k" * LONG
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    out = io.StringIO()
    tracemalloc.start()
    try:
        with redirect_stdout(out):
            assert main(["summary", str(path), "--format", "json", "--no-cache"]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert json.loads(out.getvalue())["kernels"]
    assert peak < 400e6  # was 3.1 GB: every distinct name widened to 8 MB


def test_lowered_sorts_as_numpys_fixed_width_lowercase_did():
    names = np.array(["b", "A", "a", "Ä", "aa", "", "B", "ab"], dtype=object)
    assert np.argsort(lowered(names), kind="stable").tolist() == np.argsort(
        np.char.lower(names.astype(str)), kind="stable").tolist()
