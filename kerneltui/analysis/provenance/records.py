"""Inductor's record of what each compiled kernel computes, as `kerneltui capture` writes it.

The trace's ``{"kerneltui": {"provenance": {...}}}`` block (docs/capture.md), or a
``*.provenance.json`` file of the same object (`capture --provenance-only`), lists per
generated kernel: its name, the name its events carry in the trace, the ATen ops and FX
nodes it computes, and the user's source lines and modules they came from. Anything in it
that is not what the contract says is skipped, never trusted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import orjson

from kerneltui.errors import UserError

_OVERLOAD = re.compile(r"^(aten|prims|quantized)\.([A-Za-z0-9_]+)(?:\.[A-Za-z0-9_]+)?$")
_DUPLICATE = re.compile(r"_\d+$")  # Dynamo numbers a graph's second call of a function: add_1, _foreach_add__1
_FUSED = re.compile(r"^(?:triton|cpp)_[a-z]+_fused_(?P<ops>.+?)_\d+$")  # triton_poi_fused_add_relu_0
_NAMED_MAX = 256  # Inductor caps its kernel names far below this (kernel_name_max_ops)
_CALLED = re.compile(r"(\w+)\(")  # the functions a line of code calls: torch._foreach_lerp_(, .relu(
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<function>.*)$")  # torch's python_function names


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int
    function: str = ""
    code: str = ""

    def label(self) -> str:
        return f"{Path(self.file).name}:{self.line}" + (f" in {self.function}" if self.function else "")

    def same_place(self, other: SourceLine) -> bool:
        """The same line of the same file, however each side spelled the path (absolute or relative)."""
        if self.line != other.line:
            return False
        a, b = Path(self.file).parts, Path(other.file).parts
        shorter = min(len(a), len(b))
        return shorter > 0 and a[-shorter:] == b[-shorter:]


@dataclass(frozen=True)
class KernelProvenance:
    name: str  # the generated kernel: triton_poi_fused_add_relu_0, cpp_fused_add_relu_0
    trace_name: str  # what its events are called in the trace (graph_0_cpp_fused_... on CPU)
    graph: str
    extern: bool
    kernel_hash: str | None
    aten_ops: tuple[str, ...]  # aten.add.Tensor, ...
    post_grad_nodes: tuple[str, ...]
    pre_grad_nodes: tuple[str, ...]
    source_lines: tuple[SourceLine, ...]
    module_paths: tuple[str, ...]
    cache_key: str | None = None  # its graph's FX cache key: the trace's "## Call CompiledFxGraph <key> ##"

    @property
    def op_names(self) -> frozenset[str]:
        """The ops as the profiler names the eager ops that launch kernels: aten::add."""
        return frozenset(eager_op_name(op) for op in self.aten_ops)

    @cached_property  # asked per segment of the diff
    def eager_ops(self) -> frozenset[str]:
        """The eager ops whose kernels this one does the work of: its ATen ops, in place too
        (functionalization turns `x.add_(y)` into aten.add), and the torch functions its pre-grad
        nodes call, named after them (`_foreach_add__1`)."""
        ops = self.op_names
        called = {f"aten::{_DUPLICATE.sub('', node)}" for node in self.pre_grad_nodes}
        return ops | {f"{op}_" for op in ops if not op.endswith("_")} | called | self._named_ops()

    def _named_ops(self) -> set[str]:
        """The ops Inductor named the kernel after, from the ATen ops before its decompositions
        (`triton_per_fused_nll_loss_forward_sum_threshold_backward_2`: threshold_backward, which
        ran as where and le): every run of its name's words, as an op name."""
        fused = _FUSED.match(self.name) if len(self.name) <= _NAMED_MAX else None  # a name's runs grow as its square
        words = fused["ops"].split("_") if fused else []
        return {"aten::" + "_".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}

    @cached_property
    def called_ops(self) -> frozenset[str]:
        """The torch functions its source lines call (`torch._foreach_lerp_(`, which Dynamo and Inductor
        decomposed into sub, mul and add): wider than eager_ops, as a line's ops may be in two kernels."""
        return frozenset(f"aten::{name}" for line in self.source_lines for name in _CALLED.findall(line.code))

    def summary(self) -> str:
        ops = ", ".join(dict.fromkeys(eager_op_name(o) for o in self.aten_ops)) or "no ATen op recorded"
        lines = ", ".join(s.label() for s in self.source_lines[:3]) or "no source line recorded"
        return f"{ops} at {lines}"


@dataclass(frozen=True)
class Provenance:
    source: str  # "inductor provenance tracking" or "generated code comments"
    kernels: tuple[KernelProvenance, ...]

    def by_trace_name(self) -> dict[str, KernelProvenance]:
        out: dict[str, KernelProvenance] = {}
        for k in self.kernels:
            for name in (k.trace_name, k.name):
                if name:
                    out.setdefault(name, k)
        return out

    def by_hash(self) -> dict[str, KernelProvenance]:
        return {k.kernel_hash: k for k in self.kernels if k.kernel_hash}

    def all_by_trace_name(self) -> dict[str, list[KernelProvenance]]:
        """Every record a kernel's name can mean: graphs that generated same-named kernels give several."""
        out: dict[str, list[KernelProvenance]] = {}
        for k in self.kernels:
            for name in dict.fromkeys((k.trace_name, k.name)):
                if name:
                    out.setdefault(name, []).append(k)
        return out

    def all_by_hash(self) -> dict[str, list[KernelProvenance]]:
        out: dict[str, list[KernelProvenance]] = {}
        for k in self.kernels:
            if k.kernel_hash:
                out.setdefault(k.kernel_hash, []).append(k)
        return out


def covered_text(record: KernelProvenance) -> str:
    """What `/` searches for a compiled kernel: its ops (both spellings), source lines and modules."""
    places = [f"{s.file}:{s.line} {s.label()} {s.code}" for s in record.source_lines]
    return " ".join([*record.aten_ops, *sorted(record.op_names), *places, *record.module_paths])


def eager_op_name(op: str) -> str:
    """aten.add.Tensor -> aten::add (the profiler's name of the eager op)."""
    m = _OVERLOAD.match(op)
    return f"{m.group(1)}::{m.group(2)}" if m else op


def frame_source(name: str) -> SourceLine | None:
    """A python_function event's name, ``file.py(16): add_relu``, as a SourceLine."""
    m = _FRAME.match(name)
    return SourceLine(m["file"], int(m["line"]), m["function"]) if m else None


def parse(block: object) -> Provenance | None:
    """The provenance block of a trace (or file); None when there is none or it is not one."""
    if not isinstance(block, dict) or not isinstance(block.get("kernels"), list):
        return None
    kernels = tuple(k for k in (_kernel(item) for item in block["kernels"]) if k is not None)
    return Provenance(str(block.get("source") or ""), kernels)


def read_file(path: str | os.PathLike) -> Provenance:
    """`--provenance FILE`: the mapping `capture --provenance-only` wrote. Raises UserError."""
    try:
        block = orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path}: no such provenance file") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a provenance file ({exc})") from None
    provenance = parse(block)
    if provenance is None:
        raise UserError(f"{path}: not a provenance file (no \"kernels\" list): write one with "
                        "kerneltui capture SCRIPT --provenance-only")
    return provenance


def _strings(value) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _kernel(item: object) -> KernelProvenance | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        return None
    lines = []
    for s in item.get("source_lines") or []:
        if isinstance(s, dict) and isinstance(s.get("file"), str) and isinstance(s.get("line"), int):
            lines.append(SourceLine(s["file"], s["line"], str(s.get("function", "")), str(s.get("code", ""))))
    return KernelProvenance(
        name=item["name"], trace_name=str(item.get("trace_name") or item["name"]), graph=str(item.get("graph", "")),
        extern=bool(item.get("extern", False)),
        kernel_hash=item["kernel_hash"] if isinstance(item.get("kernel_hash"), str) else None,
        aten_ops=_strings(item.get("aten_ops")), post_grad_nodes=_strings(item.get("post_grad_nodes")),
        pre_grad_nodes=_strings(item.get("pre_grad_nodes")), source_lines=tuple(lines),
        module_paths=_strings(item.get("module_paths")),
        cache_key=item["cache_key"] if isinstance(item.get("cache_key"), str) else None,
    )
