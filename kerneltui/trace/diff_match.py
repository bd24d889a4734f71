"""Which kernels of trace A correspond to which kernels of trace B.

Kernel names do not survive torch.compile (doc section 8), so matching runs in
passes, most certain first, each on what the previous passes left:

1. same kernel: equal key (full name, + hash for ambiguous Triton names), then
   equal full name;
2. same fused ops: two Triton kernels whose names list the same ops
   (``triton_poi_fused_add_relu_0`` vs ``..._1``);
3. fused: a Triton kernel ``triton_{poi,red,per,...}_fused_<ops>_<n>`` takes the
   kernels on the other side that were launched by one of ``<ops>``, looking at
   the whole op stack (``aten::relu`` launches through ``aten::clamp_min``);
4. same op: kernels launched by the same op (a GEMM that picked another
   cuBLAS/nvjet kernel), and extern kernels, which stay aten ops when compiled;
5. the rest is one-side-only, with a hint when it shares a region with
   unmatched kernels of the other side.

Regions are the names both traces can share: ``record_function`` annotations
(``mlp_forward``) and ``nn.Module`` frames (traces with stacks). Matching works
per kernel (key), with counts per step/call, so traces with different step
counts compare. Every match carries a confidence and a one-line reason.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kerneltui.trace.schema import Kind
from kerneltui.trace.traffic import Traffic, short_op

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

FUSED = re.compile(r"^triton_[a-z]+_fused_(?P<ops>.+?)_\d+$")
HIDDEN_REGIONS = ("## ", "ProfilerStep#", "Optimizer.step#", "OptimizedModule")
MATCH_COLUMNS = ["kind", "name", "a_name", "b_name", "a_keys", "b_keys", "a_count", "b_count", "a_ns", "b_ns",
                 "delta_ns", "a_bytes", "b_bytes", "a_flops", "b_flops", "a_dtype", "b_dtype", "a_largest",
                 "b_largest", "a_max_gbs", "b_max_gbs", "confidence", "reason", "region"]
KIND_ORDER = {"same": 0, "renamed": 1, "fused": 2, "op": 3, "only A": 4, "only B": 5}


def tokens(name: str) -> tuple[str, ...]:
    return tuple(t for t in re.split(r"[_\W]+", name.lower()) if t)


def fused_ops(full_name: str) -> tuple[str, ...] | None:
    """('add', 'relu') for triton_poi_fused_add_relu_0; None for a non-Inductor name."""
    m = FUSED.match(full_name)
    return tokens(m["ops"]) if m else None


def _index(haystack: tuple[str, ...], needle: tuple[str, ...]) -> int:
    """Where needle starts as a run of whole tokens in haystack, or -1."""
    n = len(needle)
    return next((i for i in range(len(haystack) - n + 1) if n and haystack[i : i + n] == needle), -1)


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    return _index(haystack, needle) >= 0


def kernel_keys(trace: Trace, traffic: Traffic) -> pd.DataFrame:
    """One row per kernel key: per-iteration count, time, bytes, op names, regions, position."""
    g = trace.gpu
    counted = g["iteration"].to_numpy() >= 0
    its = max(trace.iterations.count, 1)
    t = traffic.table
    frame = pd.DataFrame(
        {
            "key": g["key"].astype(str).to_numpy(),
            "op": g["op"].astype(str).to_numpy(),
            "dur": g["dur"].to_numpy(),
            "bytes": t["bytes"].to_numpy(),
            "flops": t["flops"].to_numpy(),
            "largest": t["largest"].to_numpy(),
            # where in its step/call the launch sits, 0..1: orders candidates
            "position": g.groupby("iteration").cumcount().to_numpy()
            / np.maximum(g.groupby("iteration")["row"].transform("size").to_numpy(), 1),
        }
    )[counted]
    grouped = frame.groupby("key", sort=False)
    keys = grouped.agg(
        count=("dur", "size"), total_ns=("dur", "sum"), position=("position", "mean"), largest=("largest", "max")
    )
    keys["bytes"] = grouped["bytes"].sum(min_count=1)
    keys["flops"] = grouped["flops"].sum(min_count=1)
    for col in ("count", "total_ns", "bytes", "flops"):
        keys[col] = keys[col] / its
    first = g[counted].groupby(g["key"].astype(str).to_numpy()[counted], sort=False).first()
    keys["short"] = first["short"].astype(str).reindex(keys.index)
    keys["full_name"] = first["full_name"].astype(str).reindex(keys.index)
    keys["kind"] = first["kind"].reindex(keys.index).astype(int)
    keys["dtype"] = traffic.table["dtype"][counted].groupby(frame["key"].to_numpy()).first().reindex(keys.index)
    main_op = frame.groupby(["key", "op"], sort=False).size().reset_index(name="n")
    main_op = main_op.sort_values("n", ascending=False, kind="stable").drop_duplicates("key").set_index("key")["op"]
    keys["op"] = main_op.reindex(keys.index)
    keys["fused"] = [fused_ops(n) for n in keys["full_name"]]
    stack_ops, regions = _stack_context(trace, g[counted])
    keys["ops"] = [stack_ops.get(k, frozenset()) for k in keys.index]
    keys["regions"] = [regions.get(k, frozenset()) for k in keys.index]
    return keys.reset_index()


def _stack_context(trace: Trace, g: pd.DataFrame) -> tuple[dict, dict]:
    """Per key: the op names on the stack of its launches, and the named regions around them.

    One launch per distinct (key, innermost op) is enough: the op stack of a
    kernel launched by the same op repeats, and this stays cheap on big traces.
    """
    ev = trace.events
    kinds = ev["kind"].to_numpy()
    names = ev["name"].to_numpy()
    sample = g.drop_duplicates(["key", "op"])
    modules = trace.gpu_sources["module"].reindex(sample.index).fillna("") if len(sample) else pd.Series(dtype=str)
    ops: dict[str, set] = {}
    regions: dict[str, set] = {}
    for key, launch, module in zip(sample["key"].astype(str), sample["launch_row"], modules):
        stack = trace.ancestors(int(launch))
        found_ops = ops.setdefault(key, set())
        found_regions = regions.setdefault(key, set())
        for row in stack:
            name = trace.name(int(names[row]))
            if kinds[row] == Kind.CPU_OP and "::" in name:
                found_ops.add(short_op(name))
            elif kinds[row] == Kind.ANNOTATION and not name.startswith(HIDDEN_REGIONS):
                found_regions.add(name)
        found_regions.update(
            f"nn.Module {m}" for m in str(module).split("/") if m and not m.startswith(HIDDEN_REGIONS)
        )
    op_names = g["op"].astype(str).to_numpy()
    for key, op in zip(g["key"].astype(str).to_numpy(), op_names):
        if "::" in op:
            ops.setdefault(key, set()).add(short_op(op))
    return {k: frozenset(v) for k, v in ops.items()}, {k: frozenset(v) for k, v in regions.items()}


def match_kernels(ka: pd.DataFrame, kb: pd.DataFrame, unit: str = "call") -> pd.DataFrame:
    """The matched table: one row per group of A keys <-> group of B keys."""
    a = ka.set_index("key", drop=False)
    b = kb.set_index("key", drop=False)
    left_a, left_b = list(a.index), list(b.index)
    rows: list[dict] = []

    def take(kind, a_keys, b_keys, confidence, reason, name=None):
        for k in a_keys:
            left_a.remove(k)
        for k in b_keys:
            left_b.remove(k)
        rows.append(_row(kind, a.loc[list(a_keys)], b.loc[list(b_keys)], confidence, reason, unit, name))

    # 1. same kernel
    for k in [k for k in left_a if k in b.index]:
        take("same", [k], [k], "high", "same kernel")
    by_full = {b.at[k, "full_name"]: k for k in left_b}
    for k in list(left_a):
        other = by_full.get(a.at[k, "full_name"])
        if other in left_b:
            take("same", [k], [other], "high", "same kernel name, other Triton source hash")
    # 2. Triton kernels fusing the same ops under another name
    for k in list(left_a):
        ops = a.at[k, "fused"]
        other = [o for o in left_b if ops and b.at[o, "fused"] == ops]
        if other:
            take("renamed", [k], [other[0]], "medium", f"both fuse {'+'.join(ops)}")
    # 3. fused kernels <- the kernels of the ops they fuse
    for x_side in ("b", "a"):
        y_label = "A" if x_side == "b" else "B"
        for group in _fused_groups(b if x_side == "b" else a, a if x_side == "b" else b,
                                   left_b if x_side == "b" else left_a, left_a if x_side == "b" else left_b, y_label):
            fused_key, eager_keys, confidence, reason, name = group
            if x_side == "b":
                take("fused", eager_keys, [fused_key], confidence, reason, name)
            else:
                take("fused", [fused_key], eager_keys, confidence, reason, name)
    # 4. same launching op
    ops_b: dict[str, list] = {}
    for k in left_b:
        ops_b.setdefault(b.at[k, "op"], []).append(k)
    for op in dict.fromkeys(a.loc[left_a, "op"]) if left_a else ():
        if not op or op not in ops_b or not [k for k in ops_b[op] if k in left_b]:
            continue
        a_keys = [k for k in left_a if a.at[k, "op"] == op]
        b_keys = [k for k in ops_b[op] if k in left_b]
        shared = _shared(a.loc[a_keys, "regions"], b.loc[b_keys, "regions"])
        where = f" in {', '.join(sorted(shared))}" if shared else ""
        take("op", a_keys, b_keys, "medium", f"both launched by {op}{where}, different kernels")
    # 5. one side only; a region shared with what is left on the other side makes that uncertain
    left_regions = {"A": _union(a.loc[left_a, "regions"]), "B": _union(b.loc[left_b, "regions"])}
    for side, frame, keys, other in (("A", a, left_a, "B"), ("B", b, left_b, "A")):
        for k in list(keys):
            shared = set(frame.at[k, "regions"]) & left_regions[other]
            reason = f"only in {side}"
            if shared:
                reason += f"; unmatched kernels of the other side share {', '.join(sorted(shared))}: uncertain"
            confidence = "low" if shared else "high"
            if side == "A":
                take("only A", [k], [], confidence, reason)
            else:
                take("only B", [], [k], confidence, reason)
    table = pd.DataFrame(rows, columns=MATCH_COLUMNS)
    order = table["kind"].map(KIND_ORDER)
    table = table.assign(_o=order, _t=-(table["a_ns"].fillna(0) + table["b_ns"].fillna(0)))
    return table.sort_values(["_o", "_t"], kind="stable").drop(columns=["_o", "_t"]).reset_index(drop=True)


def _union(regions) -> set:
    return set().union(*regions) if len(regions) else set()


def _shared(regions_a, regions_b) -> set:
    return _union(regions_a) & _union(regions_b)


def _fused_groups(x: pd.DataFrame, y: pd.DataFrame, left_x: list, left_y: list, y_label: str):
    """(fused key, [other-side keys], confidence, reason, name) for each fused kernel that takes any."""
    fused = [k for k in left_x if x.at[k, "fused"]]
    if not fused:
        return []
    candidates: dict[str, list[tuple[str, str]]] = {}  # y key -> [(x key, op name that matched)]
    for yk in left_y:
        if y.at[yk, "fused"]:
            continue
        for xk in fused:
            fused_tokens = x.at[xk, "fused"]
            hits = [op for op in y.at[yk, "ops"] if _contains(fused_tokens, tokens(op))]
            if hits:
                # in the order Inductor names them, e.g. "add, sub" for a kernel both launch
                # layer_norm is part of native_layer_norm: name the longer op only
                hits = [op for op in hits if not any(o != op and _contains(tokens(o), tokens(op)) for o in hits)]
                hits.sort(key=lambda op: _index(fused_tokens, tokens(op)))
                candidates.setdefault(yk, []).append((xk, hits))
    assigned: dict[str, list[tuple[str, str, bool]]] = {}
    for yk, options in candidates.items():
        # prefer a fused kernel in a region the eager kernel shares, then the nearest in call order
        def score(option):
            xk = option[0]
            shared = bool(x.at[xk, "regions"] & y.at[yk, "regions"])
            return (not shared, abs(x.at[xk, "position"] - y.at[yk, "position"]))

        best = min(options, key=score)
        assigned.setdefault(best[0], []).append((yk, best[1], len(options) > 1))
    groups = []
    for xk in fused:
        if xk not in assigned:
            continue
        members = sorted(assigned[xk], key=lambda m: y.at[m[0], "position"])
        keys = [m[0] for m in members]
        op_names = list(dict.fromkeys(op for m in members for op in m[1]))
        ambiguous = [y.at[m[0], "short"] for m in members if m[2]]
        shared = _shared([x.at[xk, "regions"]], y.loc[keys, "regions"])
        named_x, named_y = bool(x.at[xk, "regions"]), bool(set().union(*y.loc[keys, "regions"]))
        ops_text = FUSED.match(x.at[xk, "full_name"])["ops"]
        reason = f"Inductor named it for {ops_text}; {y_label}'s kernels were launched by {', '.join(op_names)}"
        if shared:
            reason += f" in {', '.join(sorted(shared))}"
        if ambiguous:
            confidence = "low"
            reason += f"; {len(ambiguous)} kernel(s) also fit another fused kernel: uncertain"
        elif shared or not (named_x or named_y):
            confidence = "high"
        else:
            confidence = "medium"
            reason += "; no shared region"
        groups.append((xk, keys, confidence, reason, f"{x.at[xk, 'short']} ← {' + '.join(op_names)}"))
    return groups


def _row(kind, a: pd.DataFrame, b: pd.DataFrame, confidence, reason, unit, name=None) -> dict:
    def total(frame, col):
        return float(frame[col].sum(min_count=1)) if len(frame) else np.nan

    a_name = " + ".join(a["short"]) if len(a) else ""
    b_name = " + ".join(b["short"]) if len(b) else ""
    if name is None:
        name = a_name if kind in ("same", "only A") else b_name if kind == "only B" else f"{a_name} → {b_name}"
        if kind == "op":
            name = f"{short_op(str(a['op'].iloc[0]))}: {a_name} → {b_name}"
    regions = set().union(*a["regions"], *b["regions"]) if len(a) or len(b) else set()
    shared = _shared(a["regions"], b["regions"]) if len(a) and len(b) else regions
    a_ns, b_ns = total(a, "total_ns"), total(b, "total_ns")

    def fastest(frame) -> float:
        """The highest bandwidth among the kernels (bytes per ns = GB/s): a sum can hide one above peak."""
        if not len(frame):
            return np.nan
        gbs = frame["bytes"].to_numpy(np.float64) / np.where(frame["total_ns"] > 0, frame["total_ns"], np.nan)
        return float(np.nanmax(gbs)) if np.isfinite(gbs).any() else np.nan

    return {
        "a_max_gbs": fastest(a),
        "b_max_gbs": fastest(b),
        "kind": kind,
        "name": name,
        "a_name": a_name,
        "b_name": b_name,
        "a_keys": tuple(a["key"]),
        "b_keys": tuple(b["key"]),
        "a_count": total(a, "count") if len(a) else 0.0,
        "b_count": total(b, "count") if len(b) else 0.0,
        "a_ns": a_ns if len(a) else 0.0,
        "b_ns": b_ns if len(b) else 0.0,
        "delta_ns": (b_ns if len(b) else 0.0) - (a_ns if len(a) else 0.0),
        "a_bytes": total(a, "bytes"),
        "b_bytes": total(b, "bytes"),
        "a_flops": total(a, "flops"),
        "b_flops": total(b, "flops"),
        "a_dtype": str(a["dtype"].iloc[0]) if len(a) else "",
        "b_dtype": str(b["dtype"].iloc[0]) if len(b) else "",
        "a_largest": float(a["largest"].max()) if len(a) else np.nan,
        "b_largest": float(b["largest"].max()) if len(b) else np.nan,
        "confidence": confidence,
        "reason": reason,
        "region": ", ".join(sorted(shared)) if shared else unit,
    }
