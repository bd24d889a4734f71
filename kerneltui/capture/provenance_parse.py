"""One Inductor graph's generated code and provenance artefacts, read into kernel records.

No torch here: the inputs are the strings torch's structured trace carried (the wrapper module
Inductor generated, the post-grad graph, the provenance mappings) and the Dynamo graph's node
metadata, already reduced to strings by the recorder (provenance.py).

One record per kernel call in the graph, in call order: a kernel Inductor calls twice is two
records (two events in the trace), and an extern kernel (`extern_kernels.addmm`) is the k-th
`aten::addmm` inside its graph's `## Call CompiledFxGraph <key> ##` region.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# `cpp_fused_add_relu_0 = async_compile.cpp_pybinding([...], r'''` / `triton_poi_... = async_compile.triton(`
_DEFINITION = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)
# cpp.enable_kernel_profile: the C++ kernel opens a profiler event of its own, named per graph
_RECORD_FUNCTION = re.compile(r'RAIIAtenRecordFunctionHandle \w+\("(\w+)"')
# Before each call when provenance tracking is on (pytorch#161110): "name:n", n counting calls
_DEBUG_HANDLE = re.compile(r"# \[Provenance debug handles\] (\S+:\d+)")
_ORIGIN = re.compile(r"# (?:(?:Topologically Sorted|Unsorted) )?Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]")
_KERNEL_PATH = re.compile(r"# kernel path: (\S+)")  # Triton: the file whose stem the profiler calls kernel_hash
_POST_GRAD_NODE = re.compile(r'^\s+(\w+)(?:: "[^"]*")? = torch\.ops\.([\w.]+)\(', re.MULTILINE)
_CALL = re.compile(r"^[ \t]+(?:\w+ = )?([\w.]+?)(?:\.run)?\(", re.MULTILINE)
_EXTERN = re.compile(r"^(?:extern_kernels|torch\.ops\.aten|aten)\.")
_FRAME = re.compile(r'File "(.+?)", line (\d+), in (\S+)\n[ \t]*(.*)')


@dataclass
class DynamoNode:
    """What the recorder keeps of a Dynamo graph node: enough for source lines and module paths."""

    stack_trace: str | None
    module_stack: tuple[tuple[str, str, str], ...] = ()  # (key, path, type name), outermost first


@dataclass
class GraphRecord:
    """The artefacts of one Inductor graph, as they arrived during compilation."""

    compile_id: str | None
    code: str
    post_grad_graph: str | None = None
    node_mappings: str | None = None  # json: cppCodeToPost (kernel handle -> post-grad nodes), postToPre
    kernel_stack_traces: str | None = None  # json: kernel handle -> [stack trace]
    cache_key: str | None = None
    dynamo: dict[str, DynamoNode] = field(default_factory=dict)


@dataclass(frozen=True)
class _Definition:
    trace_name: str
    kernel_hash: str | None
    origin: re.Match | None


def graph_name(code: str) -> str | None:
    """`# AOT ID: ['0_forward']` on the wrapper's first line -> "0_forward"."""
    first = code.split("\n", 1)[0]
    return first.removeprefix("# AOT ID: ").strip("[]'") if first.startswith("# AOT ID: ") else None


def _definitions(code: str) -> dict[str, _Definition]:
    found = {}
    for match in _DEFINITION.finditer(code):
        body_start = code.find("'''", match.end())
        body_end = code.find("'''", body_start + 3) if body_start >= 0 else -1
        record = _RECORD_FUNCTION.search(code, match.end(), body_end) if body_end >= 0 else None
        header = code[code.rfind("\n\n", 0, match.start()) : match.start()]  # the comment block above it
        path = _KERNEL_PATH.search(header)
        kernel_hash = path[1].rsplit("/", 1)[-1].removesuffix(".py") if path else None
        found[match[1]] = _Definition(record[1] if record else match[1], kernel_hash, _ORIGIN.search(header))
    return found


def _call_sites(code: str, defined: dict[str, _Definition]) -> list[tuple[str, str | None, re.Match | None]]:
    """(kernel, debug handle, origin comment) per kernel call, in the order the wrapper makes them.

    A call's comments are those since the previous kernel call: a GPU launch has its stream
    lookup between them and the call.
    """
    start = code.find("async_compile.wait(globals())")
    end = code.find("\ndef benchmark_compiled_module")
    body = code[max(start, 0) : end if end > 0 else len(code)]
    sites, since = [], 0
    for match in _CALL.finditer(body):
        name = match[1]
        if name not in defined and not _EXTERN.match(name):
            continue
        window = body[since : match.start()]
        handles, origins = _DEBUG_HANDLE.findall(window), list(_ORIGIN.finditer(window))
        sites.append((name, handles[-1] if handles else None, origins[-1] if origins else None))
        since = match.end()
    return sites


def _trace_name(name: str, definition: _Definition | None) -> str:
    if definition is not None:
        return definition.trace_name
    # extern_kernels.addmm, torch.ops.aten.mm.default: the profiler's aten::addmm, aten::mm
    return "aten::" + _EXTERN.sub("", name).split(".")[0]


def _listed(text: str | None) -> list[str]:
    return [item for item in (text or "").split(", ") if item]


def source_lines(stack_trace: str, library: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Where the op was made: the innermost frame of the user's code and, when the op was made
    further in, inside a library (`library`: path prefixes, torch's own), the innermost frame there.
    (Dynamo leaves torch.nn's frames out; an optimizer step is a frame of its own, all torch.optim.)"""
    frames = [
        {"file": file, "line": int(line), "function": function, "code": code.strip()}
        for file, line, function, code in _FRAME.findall(stack_trace)
    ]
    if not frames:
        return []
    users = [f for f in frames if not f["file"].startswith(library)] if library else frames
    if not users or users[-1] is frames[-1]:
        return [frames[-1]]
    return [users[-1], frames[-1]]


def module_path(stack: tuple[tuple[str, str, str], ...]) -> str:
    """nn_module_stack as "MLP.norm (LayerNorm)": the root module by its type, then the attribute path;
    a stack without its root (a module's own frame) as the path Dynamo gives, "self.proj (Linear)"."""
    (_, root, root_type), (_, path, kind) = stack[0], stack[-1]
    if len(stack) > 1 and path.startswith(root):
        path = root_type + path[len(root) :]
    # Dynamo spells paths as sources: L['self'].norm, fn.__closure__[1].cell_contents._modules['0']
    where = re.sub(r"\._modules\['([^']+)'\]", r".\1", re.sub(r"^[LG]\['([^']+)'\]", r"\1", path))
    return f"{where} ({kind})" if re.fullmatch(r"\w+(\.\w+)+", where) else kind


def _module_paths(dynamo: dict[str, DynamoNode], pre_grad: list[str], traces: list[str]) -> list[str]:
    """The modules of the kernel's pre-grad nodes; failing those (backward kernels, whose nodes are
    not Dynamo's), of the Dynamo nodes with the same stack trace, as their deepest common module."""
    stacks = [dynamo[p].module_stack for p in pre_grad if p in dynamo and dynamo[p].module_stack]
    for trace in traces if not stacks else []:
        same = [n.module_stack for n in dynamo.values() if n.stack_trace == trace and n.module_stack]
        common = tuple(entry for entry in same[0] if all(entry in other for other in same)) if same else ()
        if common:
            stacks.append(common)
    return list(dict.fromkeys(module_path(s) for s in stacks))


def _this_runs_files(dynamo: dict, library: tuple[str, ...]) -> dict[tuple, str]:
    """(file name, line, function, code) -> the path this run's Dynamo graph gives that line."""
    out = {}
    for node in dynamo.values():
        for line in source_lines(node.stack_trace or "", library):
            out.setdefault((Path(line["file"]).name, line["line"], line["function"], line["code"]), line["file"])
    return out


def _rehomed(lines: list[dict[str, Any]], here: dict[tuple, str]) -> list[dict[str, Any]]:
    """Lines whose file this run knows by another path (a cached compile's): given this run's path."""
    out = []
    for line in lines:
        path = here.get((Path(line["file"]).name, line["line"], line["function"], line["code"]))
        out.append({**line, "file": path} if path and path != line["file"] else line)
    return out


def kernels(graph: GraphRecord, library: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The graph's kernel records, in call order, in the shape of the provenance contract.

    `library`: path prefixes of code that is not the user's (torch's), for `source_lines`.
    """
    code, dynamo = graph.code, graph.dynamo
    mappings = json.loads(graph.node_mappings or "{}")
    stacks = json.loads(graph.kernel_stack_traces or "{}")
    to_post, to_pre = mappings.get("cppCodeToPost", {}), mappings.get("postToPre", {})
    aten_of = dict(_POST_GRAD_NODE.findall(graph.post_grad_graph or ""))  # post-grad node -> aten.addmm.default
    defined = _definitions(code)
    sites = _call_sites(code, defined) or [(name, None, None) for name in defined]
    name_of_graph = graph_name(code)
    here = _this_runs_files(dynamo, library)
    records = []
    for name, handle, origin in sites:
        definition = defined.get(name)
        origin = origin or (definition.origin if definition else None)
        post = to_post.get(handle) or to_post.get(name) or []
        pre = list(dict.fromkeys(p for node in post for p in to_pre.get(node, [])))
        if not pre and origin:
            # "Source Nodes" lists pre- and post-grad names alike: keep those Dynamo's graph has
            pre = [p for p in _listed(origin[1]) if not dynamo or p in dynamo]
        # Dynamo's own stack traces are this run's; Inductor's artefact may be replayed from an FX-cache
        # entry another checkout filled, with that checkout's paths
        fresh = [dynamo[p].stack_trace for p in pre if p in dynamo and dynamo[p].stack_trace]
        traces = fresh or stacks.get(handle) or stacks.get(name) or []
        user_lines, library_lines = {}, {}
        for trace in traces:
            for line in _rehomed(source_lines(trace, library), here):
                where = library_lines if library and line["file"].startswith(library) else user_lines
                where.setdefault((line["file"], line["line"], line["function"]), line)
        records.append({
            "name": name,
            "trace_name": _trace_name(name, definition),
            "graph": name_of_graph,
            "cache_key": graph.cache_key,
            "compile_id": graph.compile_id,
            "extern": definition is None,
            "kernel_hash": definition.kernel_hash if definition else None,
            "aten_ops": list(dict.fromkeys(aten_of[n] for n in post if n in aten_of)) or _listed(origin and origin[2]),
            "post_grad_nodes": post,
            "pre_grad_nodes": pre,
            "source_lines": [*user_lines.values(), *library_lines.values()],  # the user's first
            "module_paths": _module_paths(dynamo, pre, traces),
        })
    return records
