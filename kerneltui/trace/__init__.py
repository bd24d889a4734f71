"""The data layer: trace files to tables. Imports neither textual nor torch.

Its names are imported when first used (PEP 562), so that ``kerneltui.trace.cache_dir`` (a
``summary`` answered from its cached report) loads without numpy or pandas.
"""

from __future__ import annotations

__all__ = ["Kind", "Trace", "TraceMeta", "load_trace"]


def __getattr__(name: str):
    if name in ("Trace", "load_trace"):
        from kerneltui.trace import model

        return getattr(model, name)
    if name in ("Kind", "TraceMeta"):
        from kerneltui.trace import schema

        return getattr(schema, name)
    raise AttributeError(f"module 'kerneltui.trace' has no attribute {name!r}")
