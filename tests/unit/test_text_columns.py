"""text_values / text_in: the same values as ``astype(str)``, built per distinct name; texts: numpy's full of one str."""

import numpy as np
import pandas as pd
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.text_columns import text_in, text_values, texts

COLUMNS = {
    "categorical": pd.Series(pd.Categorical.from_codes([2, 0, 1, 0], categories=["add", "", "mm"])),
    "with a missing value": pd.Series(pd.Categorical(["add", None, "mm", "add"])),
    "object str": pd.Series(np.array(["f32", "", "bf16"], dtype=object)),
    "object mixed": pd.Series(np.array(["f32", None, 3.5], dtype=object)),
    "numbers": pd.Series([1, 2, 3]),
    "empty categorical": pd.Series(pd.Categorical([], categories=["a"])),
    "only missing values": pd.Series(pd.Categorical([None, None])),
    "integer categories": pd.Series(pd.Categorical([1, None, 2])),
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_text_values_are_astype_str(name):
    column = COLUMNS[name]
    got = text_values(column)
    assert got.dtype == object
    expected = column.astype(str).to_numpy()
    assert [v if isinstance(v, str) else "missing" for v in got] == [
        v if isinstance(v, str) else "missing" for v in expected]
    assert all(isinstance(v, str) or pd.isna(v) for v in got)


@pytest.mark.parametrize("name", list(COLUMNS))
def test_text_in_tests_the_same_text(name):
    column = COLUMNS[name]
    wanted = {"add", "mm", "f32", "nan", "2", "1"}  # "mm": a missing value's code -1 would read the last category
    assert text_in(column, wanted).tolist() == [v in wanted for v in column.astype(str)]


def test_gpu_table_names_as_strings(shipped_trace="tests/data/traces/mlp_bf16_eager.json.gz"):
    g = load_trace(shipped_trace, cache=False).gpu
    for column in ("short", "full_name", "op", "launch", "key"):
        assert text_values(g[column]).tolist() == g[column].astype(str).tolist()
    assert text_in(g["op"], {"aten::addmm"}).sum() == (g["op"].astype(str) == "aten::addmm").sum() > 0


@pytest.mark.parametrize(("n", "text"), [(0, ""), (1, "no-op"), (160_000, ""), (5, "step")])
def test_texts_is_numpys_full_of_one_str(n, text):
    out = texts(n, text) if text else texts(n)
    assert out.dtype == object and out.shape == (n,)
    assert np.array_equal(out, np.full(n, text, dtype=object))
    assert len({id(v) for v in out}) == min(n, 1)  # one str, not a str made per row
    out[0:1] = "x"  # written like any array
    assert n == 0 or (out[0] == "x" and (n == 1 or out[1] == text))
