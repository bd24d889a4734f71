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
# A post-grad graph's node: `addmm: "f32[8, 8]" = torch.ops.aten.addmm.default(arg2_1, relu, arg2_1)`,
# `getitem_3: "f32[2]" = _scaled_dot_product_flash_attention_for_cpu_default[0]`
_POST_GRAD_NODE = re.compile(r'^[ \t]+(\w+)(?:: "[^"]*")? = (.*)$', re.MULTILINE)
_POST_GRAD_OP = re.compile(r"torch\.ops\.([\w.]+)\(")
_POST_GRAD_FILE = re.compile(r"^[ \t]+# (?:File: (.+?):(\d+) in |No stacktrace found)", re.MULTILINE)
_PLACEHOLDERS = re.compile(r"def forward\(self, (.*?)\):")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_CALL = re.compile(r"^[ \t]+(?:\w+ = )?([\w.]+?)(?:\.run)?\(", re.MULTILINE)
# extern_kernels.addmm, torch.ops.aten.convolution_backward.default, a custom op's torch.ops.mylib.op.default
_EXTERN = re.compile(r"^(?:extern_kernels|torch\.ops\.(?!inductor\.|higher_order\.)\w+|aten)\.")
# Dynamo ops that only re-view their input: a kernel's lines name the ops that compute first
_LAYOUT = frozenset(("view", "reshape", "transpose", "permute", "t", "contiguous", "getitem", "chunk", "split",
                     "unsqueeze", "squeeze", "flatten", "expand", "size", "unflatten", "narrow", "select", "unbind"))
_FRAME = re.compile(r'File "(.+?)", line (\d+), in (\S+)\n[ \t]*(.*)')


@dataclass
class DynamoNode:
    """What the recorder keeps of a Dynamo graph node: enough for source lines and module paths."""

    stack_trace: str | None
    module_stack: tuple[tuple[str, str, str], ...] = ()  # (key, path, type name), outermost first
    target: str = ""  # what it calls, by name: matmul, softmax, view, linear
    inputs: tuple[str, ...] = ()  # the Dynamo nodes it reads


@dataclass(frozen=True)
class _PostNode:
    op: str | None  # aten.addmm.default; None for a getitem
    inputs: tuple[str, ...]
    line: tuple[str, int] | None  # the innermost frame of its stack, from the `# File:` comment above it


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


# A function the wrapper calls: `def partition_0(args):`, `def true_graph_0(args):`, `def
# repeated_subgraph0(args):` at the top level, and the entry point, `def call(self, args):` in the
# Runner class (`def call(args):` at the top level before it)
_FUNCTION = re.compile(r"^([ \t]*)def (\w+)\((?:self, )?args\):[ \t]*\n", re.MULTILINE)
_STRING = re.compile(r"r?'''.*?'''", re.DOTALL)  # kernel sources: never scanned for calls
_PARTITIONS = re.compile(r"Runner\(partitions=\[([^\]]*)\]\)")
_PARTITION_CALL = re.compile(r"self\.partitions\[(\d+)\]\(")
_DEPTH = 16  # nested subgraphs (a cond inside an invoke_subgraph inside a partition) are never this deep


@dataclass(frozen=True)
class _Site:
    name: str  # the kernel as the wrapper calls it
    handle: str | None  # its provenance debug handle, "name:n"
    origin: re.Match | None  # the "Source Nodes ... Original ATen" comment above the call
    subgraph: str | None  # the wrapper function the call is in: partition_0, true_graph_0; None in call()
    args: tuple[str, ...] = ()  # the names the call passes: graph inputs (arg0_1, primals_3), buffers, streams


def _functions(code: str) -> dict[str, str]:
    """Each function the wrapper defines for its calls -> its body (Python source, indented)."""
    found = {}
    for match in _FUNCTION.finditer(code):
        indent, start = len(match[1].expandtabs()), match.end()
        end = start
        for line in code[start:].splitlines(keepends=True):
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            end += len(line)
        found.setdefault(match[2], code[start:end])
    return found


def _is_kernel(name: str, defined: dict[str, _Definition]) -> bool:
    return name in defined or bool(_EXTERN.match(name))


def _call_sites(code: str, defined: dict[str, _Definition]) -> list[_Site]:
    """Every kernel call, in the order the wrapper makes them: from `call`, into each partition and
    subgraph function where `call` calls it (graph partitions, `cond` branches, `invoke_subgraph`
    bodies, which Inductor writes above `async_compile.wait(globals())`, each as often as it is called).

    A call's comments are those since the previous kernel call: a GPU launch has its stream
    lookup between them and the call.
    """
    blanked = _STRING.sub("''''''", code)
    functions = _functions(blanked)
    if "call" not in functions:  # not a layout we know: every call after the kernels' compilation
        start = blanked.find("async_compile.wait(globals())")
        end = blanked.find("\ndef benchmark_compiled_module")
        return _sites_in(blanked[max(start, 0) : end if end > 0 else len(blanked)], defined, {}, [], None, 0)
    listed = _PARTITIONS.search(blanked)
    partitions = [p.strip() for p in listed[1].split(",") if p.strip()] if listed else []
    return _sites_in(functions["call"], defined, functions, partitions, None, 0)


def _sites_in(body: str, defined: dict[str, _Definition], functions: dict[str, str], partitions: list[str],
              subgraph: str | None, depth: int) -> list[_Site]:
    sites: list[_Site] = []
    since = 0
    for line_start, line in _lines(body):
        inner = _PARTITION_CALL.search(line)
        callee = partitions[int(inner[1])] if inner and int(inner[1]) < len(partitions) else None
        match = _CALL.match(line)
        if callee is None and match and match[1] in functions and match[1] != "call":
            callee = match[1]
        if callee is not None and callee in functions and depth < _DEPTH:
            sites.extend(_sites_in(functions[callee], defined, functions, partitions, callee, depth + 1))
            since = line_start + len(line)
            continue
        if not match or not _is_kernel(match[1], defined):
            continue
        window = body[since:line_start]
        handles, origins = _DEBUG_HANDLE.findall(window), list(_ORIGIN.finditer(window))
        sites.append(_Site(match[1], handles[-1] if handles else None, origins[-1] if origins else None, subgraph,
                           tuple(_NAME.findall(line, match.end()))))
        since = line_start + len(line)
    return sites


def _lines(body: str):
    offset = 0
    for line in body.splitlines(keepends=True):
        yield offset, line
        offset += len(line)


def _trace_name(name: str, definition: _Definition | None) -> str:
    if definition is not None:
        return definition.trace_name
    # extern_kernels.addmm, torch.ops.aten.mm.default, torch.ops.mylib.op.default: aten::addmm, aten::mm,
    # mylib::op
    parts = name.split(".")
    if name.startswith("torch.ops.") and len(parts) > 3:
        return f"{parts[2]}::{parts[3]}"
    return "aten::" + _EXTERN.sub("", name).split(".")[0]


def _op_base(name: str) -> str:
    """extern_kernels.addmm, torch.ops.aten.addmm.default, aten.addmm.default -> addmm."""
    parts = name.split(".")
    if name.startswith("torch.ops.") and len(parts) > 3:
        return parts[3]
    return parts[1] if len(parts) > 1 else name


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


def _post_grad(text: str) -> tuple[dict[str, _PostNode], list[str]]:
    """The post-grad graph's nodes (in order) and its placeholders (the graph's inputs)."""
    signature = _PLACEHOLDERS.search(text)
    placeholders = re.findall(r'(\w+)(?:: "[^"]*")?', signature[1]) if signature else []
    known = set(placeholders)
    nodes: dict[str, _PostNode] = {}
    line: tuple[str, int] | None = None
    for row in text.splitlines():
        comment = _POST_GRAD_FILE.match(row)
        if comment:
            line = (comment[1], int(comment[2])) if comment[1] else None
            continue
        match = _POST_GRAD_NODE.match(row)
        if not match or match[1] == "return":
            continue
        rhs = match[2].split(";", 1)[0]
        op = _POST_GRAD_OP.match(rhs)
        nodes[match[1]] = _PostNode(op[1] if op else None, tuple(n for n in _NAME.findall(rhs) if n in known), line)
        known.add(match[1])
    return nodes, placeholders


def _users(post_graph: dict[str, _PostNode]) -> dict[str, list[str]]:
    """Post-grad node -> the nodes that read it, in graph order."""
    out: dict[str, list[str]] = {}
    for name, node in post_graph.items():
        for read in dict.fromkeys(node.inputs):
            out.setdefault(read, []).append(name)
    return out


def _replaced(dynamo: dict[str, DynamoNode], to_pre: dict, pre_to_post: dict, users: dict[str, list[str]],
              unmapped: list[str]) -> list[str]:
    """The Dynamo nodes a pattern replacement (SDPA: matmul, softmax, matmul -> one attention op) stands for.

    The replacement's nodes map to no pre-grad node and have no stack; the node that reads their
    result still maps to the pattern's output (`out = weights @ v`). Its pattern is that output and
    the Dynamo nodes above it that left no post-grad node of their own, up to those that did."""
    readers = dict.fromkeys(u for n in unmapped for u in users.get(n, []) if u not in unmapped)
    outputs = [p for user in readers for p in to_pre.get(user, [])]
    found, queue = [], list(dict.fromkeys(outputs))
    while queue:
        name = queue.pop(0)
        if name in found or name not in dynamo:
            continue
        found.append(name)
        # the graph's inputs and attributes have no stack: never the pattern's
        queue.extend(i for i in dynamo[name].inputs if i in dynamo and not pre_to_post.get(i) and dynamo[i].stack_trace)
    order = {name: i for i, name in enumerate(dynamo)}
    return sorted(found, key=order.__getitem__)


def _reached_unclaimed(post_graph: dict[str, _PostNode], users: dict[str, list[str]], claimed: set[str],
                       args: tuple[str, ...]) -> list[str]:
    """The post-grad nodes a generated kernel that Inductor mapped to nothing runs, found from its call.

    Inductor (2.11) records neither nodes nor stack traces for a foreach kernel of several ops
    (`triton_for_fused_1`, an optimizer step's: "Unsorted Source Nodes: []"): it runs the ops that
    read the graph inputs it is passed, and those that read their results, as far as nodes another
    kernel was mapped to. A foreach op split over two such kernels is in both (each runs its part)."""
    found: dict[str, None] = {}
    queue = [u for a in dict.fromkeys(args) for u in users.get(a, [])]
    while queue:
        name = queue.pop()
        if name not in found and name not in claimed:
            found[name] = None
            queue.extend(users.get(name, []))
    return [n for n in post_graph if n in found and post_graph[n].op]


def _computing_first(dynamo: dict[str, DynamoNode], pre: list[str]) -> list[str]:
    """Pre-grad nodes, those that compute before those that only re-view (view, transpose): a kernel's
    first source line is then the matmul or softmax it runs, not the view that fed it."""
    return sorted(pre, key=lambda p: p in dynamo and dynamo[p].target in _LAYOUT)


def _innermost(trace: str) -> tuple[str, int] | None:
    frames = _FRAME.findall(trace)
    return (frames[-1][0], int(frames[-1][1])) if frames else None


def kernels(graph: GraphRecord, library: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The graph's kernel records, in call order, in the shape of the provenance contract.

    `library`: path prefixes of code that is not the user's (torch's), for `source_lines`.
    """
    code, dynamo = graph.code, graph.dynamo
    mappings = json.loads(graph.node_mappings or "{}")
    stacks = json.loads(graph.kernel_stack_traces or "{}")
    to_post, to_pre = mappings.get("cppCodeToPost", {}), mappings.get("postToPre", {})
    pre_to_post = mappings.get("preToPost", {})
    post_graph, placeholders = _post_grad(graph.post_grad_graph or "")
    users = _users(post_graph)
    defined = _definitions(code)
    sites = _call_sites(code, defined) or [_Site(name, None, None, None) for name in defined]
    name_of_graph = graph_name(code)
    here = _this_runs_files(dynamo, library)
    claimed = {n for nodes in to_post.values() for n in nodes}
    records = []
    for site in sites:
        name, handle = site.name, site.handle
        definition = defined.get(name)
        origin = site.origin or (definition.origin if definition else None)
        post = to_post.get(handle) or to_post.get(name) or []
        if not post and definition is not None and not (origin and _listed(origin[1])):
            post = _reached_unclaimed(post_graph, users, claimed, site.args)
        own = post
        if definition is None:
            # An extern kernel runs its one op; Inductor also lists the nodes that computed its inputs
            # (the BatchNorm backward before a convolution_backward), which other kernels ran
            own = [n for n in post if n in post_graph and post_graph[n].op
                   and _op_base(post_graph[n].op) == _op_base(name)] or post
        computes = own  # the post-grad nodes whose ops it runs
        if own and all(n in placeholders for n in own):
            # a copy of the graph's inputs into the layout their users want (channels-last for a
            # convolution): no op of its own; its lines and modules are those users'
            own = [u for u in dict.fromkeys(u for n in own for u in users.get(n, [])) if post_graph[u].op] or own
        pre = list(dict.fromkeys(p for node in own for p in to_pre.get(node, [])))
        unmapped = [n for n in own if n in post_graph and post_graph[n].op and not to_pre.get(n)
                    and post_graph[n].line is None]
        if unmapped and pre_to_post and dynamo and (definition is None or not pre):
            # a pattern replacement's op (an extern: the attention kernels), or a kernel with nothing else
            pre = list(dict.fromkeys([*_replaced(dynamo, to_pre, pre_to_post, users, unmapped), *pre]))
        if not pre and origin:
            # "Source Nodes" lists pre- and post-grad names alike: keep those Dynamo's graph has
            pre = [p for p in _listed(origin[1]) if not dynamo or p in dynamo]
        pre = _computing_first(dynamo, pre)
        # Dynamo's own stack traces are this run's; Inductor's artefact may be replayed from an FX-cache
        # entry another checkout filled, with that checkout's paths
        fresh = [dynamo[p].stack_trace for p in pre if p in dynamo and dynamo[p].stack_trace]
        traces = fresh or stacks.get(handle) or stacks.get(name) or []
        if not fresh and own != post:
            # the kernel-wide stacks cover every node Inductor listed: keep those of the nodes it runs
            lines_of_own = {post_graph[n].line for n in own if n in post_graph and post_graph[n].line}
            traces = [t for t in traces if _innermost(t) in lines_of_own] or traces
        user_lines, library_lines = {}, {}
        for trace in dict.fromkeys(traces):
            for line in _rehomed(source_lines(trace, library), here):
                where = library_lines if library and line["file"].startswith(library) else user_lines
                where.setdefault((line["file"], line["line"], line["function"]), line)
        records.append({
            "name": name,
            "trace_name": _trace_name(name, definition),
            "graph": name_of_graph,
            "subgraph": site.subgraph,
            "cache_key": graph.cache_key,
            "compile_id": graph.compile_id,
            "extern": definition is None,
            "kernel_hash": definition.kernel_hash if definition else None,
            "aten_ops": list(dict.fromkeys(post_graph[n].op for n in computes if n in post_graph and post_graph[n].op))
            or ([] if computes else _listed(origin and origin[2])),
            "post_grad_nodes": computes,
            "pre_grad_nodes": pre,
            "source_lines": [*user_lines.values(), *library_lines.values()],  # the user's first
            "module_paths": _module_paths(dynamo, pre, traces),
        })
    return records
