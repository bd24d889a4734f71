"""text_classes: ops grouped by their record_shapes text, in C where the scanner is built, else by a dict."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.trace import load_trace, shape_texts
from kerneltui.trace.schema import Kind
from tests.conftest import shared_trace


def both(blob: bytes, at, length) -> list[tuple[list[int], list[int]]]:
    """The scanner's grouping and the dict's, as lists."""
    out = []
    for scan in (shape_texts._scan, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(shape_texts, "_scan", scan)
            classes, firsts = shape_texts.text_classes(blob, np.asarray(at), np.asarray(length))
            out.append((classes.tolist(), firsts.tolist()))
    return out


def test_equal_texts_share_a_class_numbered_by_first_appearance():
    blob = b'{"dims":[[2]]}{"dims":[[3]]}{"dims":[[2]]}'
    # the same text at 0 and 28; at < 0 (no record) and a length of 0 are both the empty text
    at, length = [14, 0, 28, -1, 0, 14], [14, 14, 14, 9, 0, 14]
    scanner, python = both(blob, at, length)
    assert shape_texts._scan is not None  # the repository's build has the scanner: both ways are compared
    assert scanner == python == ([0, 1, 1, 2, 2, 0], [0, 1, 3])


def test_a_text_outside_the_blob_is_an_error_both_ways():
    for scan in (shape_texts._scan, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(shape_texts, "_scan", scan)
            with pytest.raises(ValueError, match="text 1 lies outside the blob"):
                shape_texts.text_classes(b"abcdef", np.array([0, 4]), np.array([2, 3]))


def test_the_ops_of_a_training_trace_hold_few_records():
    """gpt_train_eager: 5,607 cpu_op events; counted from the JSON itself, 693 without Input Dims and 293
    distinct (Input Dims, Input type, Concrete Inputs, Input Strides) among the rest: 294 texts, the empty
    one included. Grouped alike both ways, each class's texts equal to its first's."""
    trace = load_trace(shared_trace("gpt_train_eager"))
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    at, length = ev["shapes_at"].to_numpy()[rows], ev["shapes_len"].to_numpy()[rows]
    scanner, python = both(trace.shapes_blob, at, length)
    assert scanner == python
    classes, firsts = scanner
    assert (len(rows), len(firsts)) == (5607, 294)
    text = [trace.shapes_blob[a : a + n] if a >= 0 else b"" for a, n in zip(at.tolist(), length.tolist())]
    assert all(text[i] == text[firsts[c]] for i, c in enumerate(classes))
    assert len({text[i] for i in firsts}) == len(firsts)
