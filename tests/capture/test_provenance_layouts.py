"""Every layout of Inductor's generated code the provenance parser must read, and the provenance faults.

The artefacts in tests/data/provenance/ were saved from real compiles (torch 2.13.0+cpu, this
machine) by tests/data/provenance/make.py (line numbers below are that file's; kernel sources cut
to the one line the parser reads, each C++ kernel's profiler event). Graph partitions are CUDA-graph
only; to have torch 2.13 write them for C++ kernels, make.py lets the scheduler treat CPU nodes as
cudagraphable and splits at a custom op (`custom_should_partition_ops`), so the wrapper code is
Inductor's own partition codegen. The Triton layouts (a partitioned GPU wrapper, a combo kernel)
are written below after torch 2.13's codegen (codegen/wrapper.py, scheduler.py
`_codegen_partition_wrapper`, codegen/simd.py `codegen_combo_kernel`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kerneltui.capture.provenance_parse import DynamoNode, GraphRecord, kernels

DATA = Path(__file__).parent.parent / "data" / "provenance"


def graphs(name: str) -> list[GraphRecord]:
    data = json.loads((DATA / f"{name}.json").read_text())
    out = []
    for g in data["graphs"]:
        dynamo = {k: DynamoNode(v[0], tuple(tuple(m) for m in v[1]), v[2], tuple(v[3])) for k, v in g["dynamo"].items()}
        out.append(GraphRecord(g["compile_id"], g["code"], g["post_grad_graph"], g["node_mappings"],
                               g["kernel_stack_traces"], g["cache_key"], dynamo))
    return out


def found(name: str) -> list[tuple]:
    """(graph, subgraph, kernel, ATen ops, source lines, module paths) per record, in call order."""
    return [(k["graph"], k["subgraph"], k["name"], k["aten_ops"], [s["line"] for s in k["source_lines"]],
             k["module_paths"]) for g in graphs(name) for k in kernels(g)]


def test_graph_partitions_before_the_wait_are_read_in_call_order_with_their_handles_and_lines():
    # Part.forward: 25 h = torch.relu(self.up(x)); 26 h = scale(h) (the custom op that splits);
    # 27 return torch.sigmoid(self.down(h)) + 1
    up, down = ["self.up (Linear)"], ["self.down (Linear)"]
    assert found("partition") == [
        ("0_forward", "partition_0", "extern_kernels.addmm", ["aten.addmm.default"], [25], up),
        ("0_forward", "partition_0", "cpp_fused_relu_scale_threshold_backward_0",
         ["kt.scale.default", "aten.relu.default", "aten.le.Scalar"], [26, 25], []),
        ("0_forward", None, "torch.ops.kt.scale.default", ["kt.scale.default"], [26], []),
        ("0_forward", "partition_1", "extern_kernels.addmm", ["aten.addmm.default"], [27], down),
        ("0_forward", "partition_1", "cpp_fused_add_sigmoid_1", ["aten.add.Tensor", "aten.sigmoid.default"], [27], []),
        ("0_backward", "partition_0", "cpp_fused_sigmoid_sigmoid_backward_0",
         ["aten.sigmoid.default", "aten.mul.Tensor", "aten.sub.Tensor"], [27], []),
        ("0_backward", "partition_0", "extern_kernels.mm", ["aten.mm.default"], [27], down),
        ("0_backward", "partition_0", "extern_kernels.mm", ["aten.mm.default"], [27], down),
        ("0_backward", "partition_0", "cpp_fused_mul_sum_threshold_backward_1",
         ["aten.sum.dim_IntList", "aten.where.self", "aten.full.default", "aten.mul.Tensor"], [27, 25, 26], down),
        ("0_backward", "partition_0", "extern_kernels.mm", ["aten.mm.default"], [25], up),
        ("0_backward", "partition_0", "extern_kernels.mm", ["aten.mm.default"], [25], up),
        ("0_backward", "partition_0", "cpp_fused_sum_2", ["aten.sum.dim_IntList"], [25], up),
    ]
    scale = kernels(graphs("partition")[0])[2]
    assert (scale["trace_name"], scale["extern"]) == ("kt::scale", True)  # the profiler's name of a custom op


def test_cond_branches_are_read_where_call_takes_them():
    assert [(s, n, ops[-2:]) for _, s, n, ops, _, _ in found("cond")] == [
        (None, "cpp_fused_sum_0", ["aten.sum.default"]),
        (None, "extern_kernels.addmm", ["aten.addmm.default"]),
        (None, "cpp_fused_gt_1", ["aten.gt.Scalar"]),
        ("true_graph_0", "cpp_fused_gt_mul_relu_2", ["aten.mul.Tensor", "aten.relu.default"]),
        ("false_graph_0", "cpp_fused_add_gt_sigmoid_3", ["aten.add.Tensor", "aten.sigmoid.default"]),
        (None, "cpp_fused_cos_4", ["aten.cos.default"]),
    ]
    assert {tuple(lines) for *_, lines, _ in found("cond")} == {(51,)}


def test_an_invoke_subgraph_called_twice_is_two_calls_of_each_of_its_kernels():
    body = [("repeated_subgraph0", "extern_kernels.mm", ["aten.mm.default"], [63]),
            ("repeated_subgraph0", "cpp_fused_relu_sin_0",
             ["higher_order.invoke_subgraph", "aten.sin.default", "aten.relu.default"], [63])]
    assert [(s, n, ops, lines) for _, s, n, ops, lines, _ in found("subgraph")] == [
        *body, *body, (None, "cpp_fused_sum_1", ["aten.sum.dim_IntList"], [63])]


def test_fused_attention_points_at_the_matmul_and_softmax_lines_first():
    # Attention.forward: 76 qkv; 77-79 q/k/v .view().transpose(); 80 scores = matmul(q, k.T) / ...;
    # 81 weights = scores.softmax(); 82 out = torch.matmul(weights, v); 83 out.transpose().reshape()
    forward, backward = graphs("attention_train")
    attention = kernels(forward)[1]
    assert attention["name"] == "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"
    assert attention["aten_ops"] == ["aten._scaled_dot_product_flash_attention_for_cpu.default"]
    assert [(s["line"], s["code"]) for s in attention["source_lines"][:3]] == [
        (80, "scores = torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5"),
        (81, "weights = scores.softmax(dim=-1)"),
        (82, "out = torch.matmul(weights, v)")]
    assert [s["line"] for s in attention["source_lines"]] == [80, 81, 82, 77, 78, 79]  # the transposes it absorbed
    assert attention["pre_grad_nodes"][:4] == ["matmul", "scores", "weights", "out"]
    sdpa_backward = kernels(backward)[1]
    assert (sdpa_backward["aten_ops"], [s["line"] for s in sdpa_backward["source_lines"]]) == (
        ["aten._scaled_dot_product_flash_attention_for_cpu_backward.default"], [82, 83])


def test_convolution_backward_is_the_convolutions_not_the_batch_norms():
    # ConvBN.forward: 101 x = self.conv(x); 102 x = self.bn(x); 103 relu; 104 conv2; 105 bn2; 106 sum
    records = [k for g in graphs("convbn") for k in kernels(g)]
    backward = [(k["name"], k["aten_ops"], [s["line"] for s in k["source_lines"]], k["module_paths"])
                for k in records if k["extern"] and k["graph"] == "0_backward"]
    assert backward == [
        ("torch.ops.aten.convolution_backward.default", ["aten.convolution_backward.default"], [104],
         ["self.conv2 (Conv2d)"]),
        ("torch.ops.aten.convolution_backward.default", ["aten.convolution_backward.default"], [101],
         ["self.conv (Conv2d)"]),
    ]
    assert records[-3]["post_grad_nodes"] == ["convolution_backward"]


def test_an_input_layout_copy_names_the_ops_it_copies_for():
    """The channels-last copy of a convolution's inputs maps to graph inputs only: no op, but the lines and
    modules of the convolutions it is made for (it had none)."""
    copy = kernels(graphs("convbn")[0])[0]
    assert (copy["name"], copy["aten_ops"], copy["post_grad_nodes"]) == ("cpp_fused_0", [],
                                                                         ["primals_1", "primals_3", "primals_9"])
    assert ([s["line"] for s in copy["source_lines"]], copy["module_paths"]) == (
        [101, 104], ["self.conv (Conv2d)", "self.conv2 (Conv2d)"])


# A CUDA-graph capture (max-autotune / reduce-overhead) on a GPU, after torch 2.13's codegen: kernels
# defined between partitions, the partitions above async_compile.wait(globals()), a device guard in
# call(); partition_0 holds a combo kernel (one Triton kernel doing three ops' work, named and
# commented like any Triton kernel: codegen/simd.py codegen_combo_kernel -> define_kernel).
GPU_PARTITIONS = '''# AOT ID: ['1_forward']
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_me/ab/cabcombo.py
# Topologically Sorted Source Nodes: [r, s, c], Original ATen: [aten.relu, aten.sin, aten.cos]
triton_poi_fused_cos_relu_sin_0 = async_compile.triton('triton_poi_fused_cos_relu_sin_0', \'\'\'
@triton.jit
def triton_poi_fused_cos_relu_sin_0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, out_ptr1, out_ptr2, XBLOCK : tl.constexpr):
    pid = tl.program_id(0)
\'\'\', device_str='cuda')

def partition_0(args):
    primals_1, primals_2, primals_3 = args
    args.clear()
    buf0 = empty_strided_cuda((64, ), (1, ), torch.float32)
    buf1 = empty_strided_cuda((32, ), (1, ), torch.float32)
    buf2 = empty_strided_cuda((16, ), (1, ), torch.float32)
    # Topologically Sorted Source Nodes: [r, s, c], Original ATen: [aten.relu, aten.sin, aten.cos]
    # [Provenance debug handles] triton_poi_fused_cos_relu_sin_0:1
    stream0 = get_raw_stream(0)
    triton_poi_fused_cos_relu_sin_0.run(primals_1, primals_2, primals_3, buf0, buf1, buf2, stream=stream0)
    return (buf0, buf1, buf2, )


# kernel path: /tmp/torchinductor_me/cd/cdadd.py
# Topologically Sorted Source Nodes: [y], Original ATen: [aten.add]
triton_poi_fused_add_1 = async_compile.triton('triton_poi_fused_add_1', \'\'\'
@triton.jit
def triton_poi_fused_add_1(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_out_ptr0 + (x0), xmask)
\'\'\', device_str='cuda')

def partition_1(args):
    buf4, = args
    args.clear()
    # [Provenance debug handles] triton_poi_fused_add_1:3
    stream0 = get_raw_stream(0)
    triton_poi_fused_add_1.run(buf4, 64, stream=stream0)
    return (buf4, )


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        primals_1, primals_2, primals_3 = args
        args.clear()
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            partition0_args = [primals_1, primals_2, primals_3]
            (buf0, buf1, buf2) = self.partitions[0](partition0_args)
            del partition0_args
            # Topologically Sorted Source Nodes: [n], Original ATen: [aten.nonzero]
            # [Provenance debug handles] torch.ops.aten.nonzero.default:2
            buf3 = torch.ops.aten.nonzero.default(buf0)
            buf4 = buf3
            partition1_args = [buf4]
            (buf4, ) = self.partitions[1](partition1_args)
            del partition1_args
        return (buf4, )

runner = Runner(partitions=[partition_0, partition_1])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def benchmark_compiled_module(args, times=10, repeat=10):
    fn = lambda: call(list(args))
'''

USER = '  File "/home/me/model.py", line {}, in forward\n    {}\n'


def test_a_gpu_partitioned_wrapper_with_a_combo_kernel_keeps_handles_hashes_and_lines():
    mappings = {"cppCodeToPost": {"triton_poi_fused_cos_relu_sin_0:1": ["relu", "sin", "cos"],
                                  "torch.ops.aten.nonzero.default:2": ["nonzero"],
                                  "triton_poi_fused_add_1:3": ["add"]},
                "postToPre": {"relu": ["r"], "sin": ["s"], "cos": ["c"], "nonzero": ["n"], "add": ["y"]}}
    stacks = {"triton_poi_fused_cos_relu_sin_0:1": [USER.format(3, "r = a.relu()"), USER.format(4, "s = b.sin()"),
                                                     USER.format(5, "c = c.cos()")],
              "torch.ops.aten.nonzero.default:2": [USER.format(6, "n = r.nonzero()")],
              "triton_poi_fused_add_1:3": [USER.format(7, "y = n + 1")]}
    post = ('def forward(self, primals_1: "f32[64]", primals_2: "f32[32]", primals_3: "f32[16]"):\n'
            '        relu: "f32[64]" = torch.ops.aten.relu.default(primals_1)\n'
            '        sin: "f32[32]" = torch.ops.aten.sin.default(primals_2)\n'
            '        cos: "f32[16]" = torch.ops.aten.cos.default(primals_3)\n'
            '        nonzero: "i64[u0, 1]" = torch.ops.aten.nonzero.default(relu)\n'
            '        add: "i64[u0, 1]" = torch.ops.aten.add.Tensor(nonzero, 1)\n')
    graph = GraphRecord("1/0", GPU_PARTITIONS, post_grad_graph=post, node_mappings=json.dumps(mappings),
                        kernel_stack_traces=json.dumps(stacks), cache_key="fgpu")
    records = kernels(graph)
    assert [(k["subgraph"], k["name"], k["trace_name"], k["kernel_hash"], k["aten_ops"],
             [s["line"] for s in k["source_lines"]]) for k in records] == [
        ("partition_0", "triton_poi_fused_cos_relu_sin_0", "triton_poi_fused_cos_relu_sin_0", "cabcombo",
         ["aten.relu.default", "aten.sin.default", "aten.cos.default"], [3, 4, 5]),
        (None, "torch.ops.aten.nonzero.default", "aten::nonzero", None, ["aten.nonzero.default"], [6]),
        ("partition_1", "triton_poi_fused_add_1", "triton_poi_fused_add_1", "cdadd", ["aten.add.Tensor"], [7]),
    ]
    assert [k["post_grad_nodes"] for k in records] == [["relu", "sin", "cos"], ["nonzero"], ["add"]]
    assert {(k["graph"], k["cache_key"], k["compile_id"]) for k in records} == {("1_forward", "fgpu", "1/0")}


ADAM = "/opt/torch/.venv/lib/python3.12/site-packages/torch/"  # torch's folder on the H200 machine


def test_a_foreach_kernel_inductor_mapped_to_nothing_runs_the_ops_its_inputs_feed():
    # adam_foreach_h200.json: AdamW's step compiled on an H200 (torch 2.11). Inductor maps its first
    # foreach kernel to `_foreach_add_` (the step count, adam.py:687) and the second, the whole
    # update, to nothing ("Unsorted Source Nodes: []", no stack traces): its ops are those that read
    # the parameters and moments it is passed, up to the node the first kernel has.
    first, update = kernels(graphs("adam_foreach_h200")[0], (ADAM,))
    assert (first["name"], first["aten_ops"], [s["line"] for s in first["source_lines"]]) == (
        "triton_for_fused_0", ["aten._foreach_add_.Scalar"], [687])
    assert update["name"] == "triton_for_fused_1" and update["kernel_hash"] == "cbwj2qj3rvpp4suvy3oq5reucxnbuoof2jgy3z7xaks237qhcihe"
    assert update["aten_ops"] == [
        "aten._foreach_mul.Scalar", "aten._foreach_sub.List", "aten._foreach_add_.List", "aten._foreach_mul.List",
        "aten._foreach_add.List", "aten._foreach_sub.Scalar", "aten._foreach_neg.default", "aten._foreach_div.Scalar",
        "aten._foreach_reciprocal.default", "aten._foreach_sqrt.default", "aten._foreach_div.List",
        "aten._foreach_add.Scalar", "aten.copy_.default"]
    assert "_foreach_add" not in update["post_grad_nodes"] and update["post_grad_nodes"][:2] == ["_foreach_mul", "_foreach_sub"]
    assert {s["file"] for s in update["source_lines"]} == {ADAM + "optim/adam.py"}
    assert [s["line"] for s in update["source_lines"]] == [692, 705, 709, 722, 738, 739, 741, 744, 745, 747, 763, 765,
                                                         766, 767, 770]
    assert update["source_lines"][0]["code"] == "torch._foreach_mul_(device_params, 1 - lr * weight_decay)"


def test_a_kernel_with_no_mapping_and_no_graph_input_runs_nothing_it_can_be_given():
    # the same graph, the update's call passing none of the graph's inputs: nothing to follow, no ops
    graph = graphs("adam_foreach_h200")[0]
    graph.code, calls = re.subn(r"triton_for_fused_1\.run\(.*\)", "triton_for_fused_1.run(buf0, buf1, stream=stream0)",
                                graph.code)
    assert calls == 1
    update = kernels(graph, (ADAM,))[1]
    assert (update["name"], update["aten_ops"], update["source_lines"]) == ("triton_for_fused_1", [], [])
