"""Compile small models with kerneltui's recorder and dump each graph's artefacts into $OUT (make.py).

    OUT=/tmp python tests/data/provenance/make.py partition   # then trim as tests/capture/test_provenance_layouts.py says
"""

import json
import os
from pathlib import Path

import torch
import torch._inductor.config as cfg

from kerneltui.capture import provenance

OUT = Path(os.environ.get("OUT", "/tmp"))


def run(name, fn, inputs, patches=None, mode=None):
    torch._dynamo.reset()
    with cfg.patch({"fx_graph_cache": False, **(patches or {})}), provenance.recording() as rec:
        out = torch.compile(fn, backend=rec.backend(mode))(*inputs)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward()
    graphs = []
    for g in rec.graphs:
        dynamo = rec.dynamo.get(g.compile_id, {})
        graphs.append({"compile_id": g.compile_id, "code": g.code, "post_grad_graph": g.post_grad_graph,
                       "node_mappings": g.node_mappings, "kernel_stack_traces": g.kernel_stack_traces,
                       "cache_key": g.cache_key,
                       "dynamo": {k: [v.stack_trace, [list(m) for m in v.module_stack], v.target, list(v.inputs)]
                                  for k, v in dynamo.items()}})
    (OUT / f"{name}.json").write_text(json.dumps(graphs, indent=1))
    block = rec.block()
    (OUT / f"{name}.block.json").write_text(json.dumps(block, indent=1))
    for i, g in enumerate(graphs):
        (OUT / f"{name}.{i}.py").write_text(g["code"])
    print(name, len(graphs), rec.failure, "partitions:", sum(g["code"].count("def partition_") for g in graphs))
    for k in block.get("kernels", []):
        print(" ", k["graph"], k.get("subgraph"), k["name"], k["aten_ops"], [s["line"] for s in k["source_lines"]])
