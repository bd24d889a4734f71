"""What each compiled kernel came from, recorded while the workload compiles (docs/capture.md#provenance).

    with provenance.recording() as recorder:        # around the compiling and warm-up calls only
        call = torch.compile(fn, backend=recorder.backend(compile_mode))
        call(*inputs)
    recorder.block()  # {"version": 1, "source": ..., "torch": ..., "kernels": [...]}

Inductor publishes what it compiles on torch's structured trace (the `torch.__trace` logger
behind TORCH_TRACE and tlparse): the generated code and, with provenance tracking on, which
post-grad and pre-grad nodes and stack traces each kernel came from. A logging handler takes
them in memory during the block; after it nothing of ours runs, so profiled calls cost the same.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from kerneltui.capture.provenance_parse import DynamoNode, GraphRecord, kernels

VERSION = 1
TRACKING = "inductor provenance tracking"
COMMENTS = "generated code comments"
TRACE_LOGGER = "torch.__trace"
# Newest first: the level (pytorch#160383, Aug 2025) replaced the bool (pytorch#158399, Jul 2025).
TRACKING_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("trace.provenance_tracking_level", 1),
    ("trace.provenance_tracking", True),
)
# Without it a C++ kernel is no profiler event: a CPU trace would not show the compiled kernels.
KERNEL_PROFILE_OPTION = "cpp.enable_kernel_profile"

_LIBRARY = (os.path.dirname(torch.__file__) + os.sep,)  # frames there are torch's, not the user's
_POST_GRAD, _MAPPINGS, _STACKS = (
    "inductor_post_grad_graph",
    "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces",
)


@dataclass(frozen=True)
class Support:
    """What this torch can tell: the source the records will come from, and a warning if degraded."""

    source: str | None
    tracking_option: tuple[str, Any] | None
    warning: str | None  # one line for stderr, without the "kerneltui: warning: " prefix


def _has_option(dotted: str) -> bool:
    section, _, name = dotted.rpartition(".")
    try:
        config = torch._inductor.config
        holder = functools.reduce(getattr, section.split("."), config) if section else config
    except AttributeError:
        return False
    return holder is not None and hasattr(holder, name)


def _publishes_generated_code() -> bool:
    """The structured trace that carries `inductor_output_code` (torch >= 2.3)."""
    return hasattr(torch._logging, "trace_structured")


def support() -> Support:
    version = torch.__version__
    if not _publishes_generated_code():
        return Support(None, None, f"torch {version} publishes neither Inductor's provenance tracking nor its "
                                   "generated code: kernel provenance cannot be recorded")
    for option, value in TRACKING_OPTIONS:
        if _has_option(option):
            return Support(TRACKING, (option, value), None)
    return Support(COMMENTS, None, f"torch {version} has no Inductor provenance tracking: kernel provenance "
                                   "comes from the generated code's comments (fewer ATen ops and source lines)")


def _compile_id(frame_id: object, frame_compile_id: object) -> str | None:
    return None if frame_id is None else f"{frame_id}/{frame_compile_id}"


def _type_name(kind: object) -> str:
    return getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1].strip("'>")


class _RecordingInductor(torch._TorchCompileInductorWrapper):
    """torch.compile's own Inductor backend, which also keeps each Dynamo graph's node metadata
    (nn_module_stack, stack_trace): the module paths are in no artefact."""

    def __init__(self, mode: str | None, recorder: Recorder):
        super().__init__(mode, None, None)
        self.recorder = recorder
        self.__name__ = "inductor"  # what torch.compile's wrapper reports as the backend's name

    def __call__(self, model_, inputs_, **kwargs):
        self.recorder.dynamo_graph(model_)
        return super().__call__(model_, inputs_, **kwargs)


class Recorder(logging.Handler):
    def __init__(self, found: Support):
        super().__init__(logging.DEBUG)
        self.support = found
        self.graphs: list[GraphRecord] = []  # Inductor graphs (forward, backward, inference), in compile order
        self.dynamo: dict[str | None, dict[str, DynamoNode]] = {}  # compile id -> Dynamo node name -> node
        self.dynamo_graphs = 0
        self.failure: str | None = None
        self._pre_grad_ids: dict[str | None, int] = {}
        self._post_grad: str | None = None

    def backend(self, compile_mode: str | None) -> _RecordingInductor:
        return _RecordingInductor(compile_mode, self)

    def dynamo_graph(self, gm: torch.fx.GraphModule) -> None:
        cid = torch._guards.CompileContext.current_compile_id()
        key = _compile_id(cid.frame_id, cid.frame_compile_id) if cid else None
        nodes = {}
        for node in gm.graph.nodes:
            stack = node.meta.get("nn_module_stack") or {}
            modules = tuple((str(k), str(v[0]), _type_name(v[1])) for k, v in stack.items())
            target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            inputs = tuple(n.name for n in node.all_input_nodes)
            nodes[node.name] = DynamoNode(node.meta.get("stack_trace"), modules, str(target), inputs)
        self.dynamo.setdefault(key, {}).update(nodes)
        self.dynamo_graphs += 1

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._receive(getattr(record, "metadata", None) or {}, getattr(record, "payload", None))
        except Exception as exc:  # noqa: BLE001 - a format we do not know must never break the compile
            self.failure = self.failure or f"{type(exc).__name__}: {exc}"

    def _receive(self, meta: dict, payload: str | None) -> None:
        kind = next(iter(meta), None)
        name = meta[kind].get("name") if kind == "artifact" and isinstance(meta[kind], dict) else kind
        cid = _compile_id(meta.get("frame_id"), meta.get("frame_compile_id"))
        if name == "inductor_output_code":  # a fresh compile and an FX-cache hit alike
            self.graphs.append(GraphRecord(cid, payload or "", post_grad_graph=self._post_grad))
            self._post_grad = None
        elif name == "before_pre_grad_graph" and payload and "# graph id: " in payload:
            self._pre_grad_ids[cid] = int(payload.rsplit("# graph id: ", 1)[1].split()[0])
        elif name == _POST_GRAD:
            self._post_grad = payload
            # A backward graph compiles after its forward restored Inductor's provenance globals, and
            # would map none of its kernels: point it at the forward's pre-grad graph.
            if cid in self._pre_grad_ids and hasattr(torch._inductor.debug, "_pre_grad_graph_id"):
                torch._inductor.debug._pre_grad_graph_id = self._pre_grad_ids[cid]
        elif name == _MAPPINGS and self.graphs:
            self.graphs[-1].node_mappings = payload
        elif name == _STACKS and self.graphs:
            self.graphs[-1].kernel_stack_traces = payload
        elif name and name.startswith("fx_graph_cache_") and self.graphs and payload:
            # the key the trace's "## Call CompiledFxGraph <key> ##" annotation carries
            self.graphs[-1].cache_key = self.graphs[-1].cache_key or json.loads(payload).get("key")

    def block(self) -> dict[str, Any]:
        """The `provenance` object of the contract (docs/capture.md): the trace block, or the file."""
        head = {"version": VERSION, "source": self.support.source, "torch": torch.__version__}
        reason = self._reason()
        if reason:
            return {**head, "source": None, "kernels": [], "reason": reason}
        try:
            records = []
            for graph in self.graphs:
                graph.dynamo = self.dynamo.get(graph.compile_id, {})
                records.extend(kernels(graph, _LIBRARY))
        except Exception as exc:  # noqa: BLE001 - the trace is still worth keeping
            return {**head, "source": None, "kernels": [],
                    "reason": f"could not read Inductor's artefacts ({type(exc).__name__}: {exc})"}
        return {**head, "kernels": records}

    def _reason(self) -> str | None:
        if self.support.source is None:
            return self.support.warning
        if self.graphs:
            return None
        if self.failure:
            return f"could not read Inductor's artefacts ({self.failure})"
        if self.dynamo_graphs:
            return (f"Inductor compiled {self.dynamo_graphs} graph{'s' * (self.dynamo_graphs > 1)} but published "
                    f"no generated code on {TRACE_LOGGER}")
        return "torch.compile compiled no graph in the warm-up calls"


@contextlib.contextmanager
def recording(kernel_profile: bool = True) -> Iterator[Recorder]:
    """Provenance tracking (and C++ kernel events) on for the compiles inside the block, artefacts recorded."""
    found = support()
    recorder = Recorder(found)
    patches = dict([found.tracking_option] if found.tracking_option else [])
    if kernel_profile and _has_option(KERNEL_PROFILE_OPTION):
        patches[KERNEL_PROFILE_OPTION] = True
    log = logging.getLogger(TRACE_LOGGER)
    level = log.level
    if found.source is not None:
        log.setLevel(logging.DEBUG)
        log.addHandler(recorder)
    try:
        with torch._inductor.config.patch(patches):
            yield recorder
    finally:
        log.removeHandler(recorder)
        log.setLevel(level)
