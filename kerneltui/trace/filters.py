"""Name filters over the GPU table: matched on the few distinct names, then mapped to rows.

Matching distinct names rather than rows keeps a keystroke's filter at a few
milliseconds on a million launches.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kerneltui.errors import UserError


def name_pattern(pattern: str) -> re.Pattern:
    """Substring (case-insensitive), or a regular expression after a leading '/'."""
    if pattern.startswith("/"):
        try:
            return re.compile(pattern[1:], re.IGNORECASE)
        except re.error as exc:
            raise UserError(f"bad filter regex {pattern[1:]!r}: {exc}") from None
    return re.compile(re.escape(pattern), re.IGNORECASE)


SEARCHED = 16_384


def matching_rows(gpu: pd.DataFrame, pattern: str, columns=("short", "full_name")) -> np.ndarray:
    """Boolean mask of GPU rows whose short or full name matches the pattern."""
    if not pattern:
        return np.ones(len(gpu), bool)
    regex = name_pattern(pattern)
    mask = np.zeros(len(gpu), bool)
    for column in columns:
        names = gpu[column]
        if not isinstance(names.dtype, pd.CategoricalDtype):
            names = names.astype("category")
        # a regex can backtrack quadratically: search the first SEARCHED characters of a name (real names
        # stay under 2,000; a trace can carry megabyte ones)
        hits = np.fromiter((bool(regex.search(str(c)[:SEARCHED])) for c in names.cat.categories), bool)
        codes = names.cat.codes.to_numpy()
        mask |= (codes >= 0) & hits[np.clip(codes, 0, None)] if len(hits) else False
    return mask
