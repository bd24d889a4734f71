"""Text columns (kernel, op and launch names) as Python strings, without a string per row.

The GPU table's name columns are categoricals: a million rows, a few hundred names.
``column.astype(str).to_numpy()`` builds an Arrow string per row and then a Python
string per row (0.4 s at a million kernels); these go through the categories instead,
and give the same values.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd


def texts(n: int, text: str = "") -> np.ndarray:
    """``np.full(n, text, dtype=object)``, every row the one str: numpy's full makes a str per row from its
    unicode copy (12 ms and 8 MB for 160k rows, against 0.35 ms)."""
    out = np.empty(n, dtype=object)
    out.fill(text)
    return out


def text_values(column: pd.Series) -> np.ndarray:
    """``column.astype(str).to_numpy()``: an object array of str, the same values, built per distinct value."""
    values = column.array
    if _text_categories(values):
        categories = _category_text(values)
        codes = values.codes
        if len(codes) and codes.min() < 0:  # a missing value stays missing (NaN), as astype(str) leaves it
            categories = np.append(categories, np.nan)
            codes = np.where(codes >= 0, codes, len(categories) - 1)
        return categories[codes]
    plain = column.to_numpy()
    if plain.dtype == object and pd.api.types.infer_dtype(plain, skipna=False) == "string":
        return plain  # already every value a str
    return column.astype(str).to_numpy()


def text_in(column: pd.Series, wanted: Collection[str]) -> np.ndarray:
    """Which rows' text (as ``text_values``) is one of ``wanted``: tested once per distinct value."""
    values = column.array
    if _text_categories(values):
        hit = np.append(np.isin(_category_text(values), list(wanted)), False)  # code -1, missing: never
        return hit[values.codes]
    return np.isin(text_values(column), list(wanted))


def _text_categories(values) -> bool:
    """A categorical of strings: its categories are what astype(str) gives (integer categories with a
    missing value would come back as floats, "1.0": those go the long way)."""
    return isinstance(values, pd.Categorical) and pd.api.types.infer_dtype(values.categories, skipna=False) in (
        "string", "empty")


def _category_text(values: pd.Categorical) -> np.ndarray:
    return np.asarray(values.categories.astype(str).to_numpy(), dtype=object)
