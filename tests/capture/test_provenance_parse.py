"""Reading Inductor's generated code and artefacts into kernel records: no torch, no compile.

The GPU wrapper below is cut down from real Inductor output (torch 2.9+ on an H200: kernel path
and origin comments above each Triton definition, a debug handle and a stream lookup before
each launch, an ATen fallback called in place); this machine compiles only for the CPU.
"""

from __future__ import annotations

import json

from kerneltui.capture.provenance_parse import (
    DynamoNode,
    GraphRecord,
    kernels,
    module_path,
    source_lines,
)

TRITON_WRAPPER = '''# AOT ID: ['3_inference']
from torch._inductor.select_algorithm import extern_kernels
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_me/jo/cjow4e6dxix6bjudevqkawkv6k72kpf.py
# Topologically Sorted Source Nodes: [x, h], Original ATen: [aten.add, aten.relu]
# Source node to ATen node mapping:
#   h => relu
#   x => add
# Graph fragment:
#   %add : Tensor "f32[8]" = call_function[target=torch.ops.aten.add.Tensor](args = (%a, %b), kwargs = {})
triton_poi_fused_add_relu_0 = async_compile.triton('triton_poi_fused_add_relu_0', \'\'\'
@triton.jit
def triton_poi_fused_add_relu_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
\'\'\', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((8, ), (1, ), torch.float32)
            # Topologically Sorted Source Nodes: [x, h], Original ATen: [aten.add, aten.relu]
            # [Provenance debug handles] triton_poi_fused_add_relu_0:7
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_relu_0.run(arg0_1, arg1_1, buf0, 8, stream=stream0)
            buf1 = empty_strided_cuda((8, 8), (8, 1), torch.float32)
            # Topologically Sorted Source Nodes: [y], Original ATen: [aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:8
            extern_kernels.addmm(arg2_1, buf0, arg2_1, alpha=1, beta=1, out=buf1)
            # Topologically Sorted Source Nodes: [attn], Original ATen: [aten._scaled_dot_product_efficient_attention]
            buf2 = torch.ops.aten._scaled_dot_product_efficient_attention.default(buf1, buf1, buf1, None, False)
            buf3 = buf2[0]
            assert_size_stride(buf3, (8, 8), (8, 1), 'torch.ops.aten._scaled_dot_product_efficient_attention.default')
            # [Provenance debug handles] triton_poi_fused_add_relu_0:9
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_relu_0.run(buf3, buf3, buf0, 8, stream=stream0)
        return (buf0, )


def benchmark_compiled_module(times=10, repeat=10):
    triton_poi_fused_add_relu_0.run(arg0_1, arg1_1, buf0, 8, stream=stream0)
'''

POST_GRAD = '''def forward(self, arg0_1: "f32[8]", arg1_1: "f32[8]"):
        add: "f32[8]" = torch.ops.aten.add.Tensor(arg0_1, arg1_1)
        relu: "f32[8]" = torch.ops.aten.relu.default(add);  add = None
        addmm: "f32[8, 8]" = torch.ops.aten.addmm.default(arg2_1, relu, arg2_1)
'''

USER_STACK = '  File "/home/me/model.py", line 12, in forward\n    h = torch.relu(x)\n'
DYNAMO = {
    "x": DynamoNode(USER_STACK, (("L__self__", "L['self']", "Net"), ("L__self__.block", "L['self'].block", "Block"))),
    "h": DynamoNode(USER_STACK, (("L__self__", "L['self']", "Net"),)),
    "y": DynamoNode('  File "/home/me/model.py", line 13, in forward\n    return self.proj(h)\n',
                    (("L__self__", "L['self']", "Net"), ("L__self__.proj", "L['self'].proj", "Linear"))),
}


def test_triton_kernels_are_named_as_launched_with_their_cache_stem_and_call_order():
    graph = GraphRecord("0/0", TRITON_WRAPPER, cache_key="fabc", dynamo=DYNAMO)
    found = [(k["name"], k["trace_name"], k["extern"], k["kernel_hash"]) for k in kernels(graph)]
    assert found == [
        ("triton_poi_fused_add_relu_0", "triton_poi_fused_add_relu_0", False, "cjow4e6dxix6bjudevqkawkv6k72kpf"),
        ("extern_kernels.addmm", "aten::addmm", True, None),
        ("torch.ops.aten._scaled_dot_product_efficient_attention.default",
         "aten::_scaled_dot_product_efficient_attention", True, None),
        ("triton_poi_fused_add_relu_0", "triton_poi_fused_add_relu_0", False, "cjow4e6dxix6bjudevqkawkv6k72kpf"),
    ]
    assert {(k["graph"], k["cache_key"], k["compile_id"]) for k in kernels(graph)} == {("3_inference", "fabc", "0/0")}


def test_without_artefacts_the_comments_give_ops_nodes_lines_and_modules():
    first, addmm, attention, second = kernels(GraphRecord("0/0", TRITON_WRAPPER, dynamo=DYNAMO))
    assert (first["aten_ops"], first["pre_grad_nodes"], first["post_grad_nodes"]) == (
        ["aten.add", "aten.relu"], ["x", "h"], [])
    assert first["source_lines"] == [{"file": "/home/me/model.py", "line": 12, "function": "forward",
                                      "code": "h = torch.relu(x)"}]
    assert first["module_paths"] == ["Net.block (Block)", "Net"]
    assert (addmm["aten_ops"], addmm["module_paths"]) == (["aten.t", "aten.addmm"], ["Net.proj (Linear)"])
    assert attention["aten_ops"] == ["aten._scaled_dot_product_efficient_attention"]
    # a launch with no comment of its own falls back to its definition's
    assert second["aten_ops"] == ["aten.add", "aten.relu"]


def test_provenance_artefacts_win_over_comments_and_map_each_call_by_its_handle():
    mappings = {"cppCodeToPost": {"triton_poi_fused_add_relu_0:7": ["add", "relu"], "extern_kernels.addmm:8": ["addmm"],
                                  "triton_poi_fused_add_relu_0:9": ["relu"]},
                "postToPre": {"add": ["x"], "relu": ["h"], "addmm": ["y"]}}
    stacks = {"triton_poi_fused_add_relu_0:7": [USER_STACK]}
    graph = GraphRecord("0/0", TRITON_WRAPPER, post_grad_graph=POST_GRAD, node_mappings=json.dumps(mappings),
                        kernel_stack_traces=json.dumps(stacks), dynamo=DYNAMO)
    first, addmm, _, second = kernels(graph)
    assert (first["aten_ops"], first["post_grad_nodes"], first["pre_grad_nodes"]) == (
        ["aten.add.Tensor", "aten.relu.default"], ["add", "relu"], ["x", "h"])
    assert (addmm["aten_ops"], addmm["pre_grad_nodes"]) == (["aten.addmm.default"], ["y"])
    assert addmm["source_lines"][0]["line"] == 13  # from the Dynamo node, the artefact having no stack for it
    assert (second["aten_ops"], second["pre_grad_nodes"]) == (["aten.relu.default"], ["h"])


CPP_WRAPPER = '''# AOT ID: ['0_forward']
async_compile = AsyncCompile()


cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C"  void  kernel(float* in_out_ptr0)
{
    torch::aot_inductor::RAIIAtenRecordFunctionHandle record_graph_5_cpp_fused_relu_0_("graph_5_cpp_fused_relu_0", nullptr);
}
\'\'\')


async_compile.wait(globals())
del async_compile

class Runner:
    def call(self, args):
        # Topologically Sorted Source Nodes: [input_1], Original ATen: [aten.t, aten.addmm]
        extern_kernels.addmm(primals_2, primals_3, primals_1, alpha=1, beta=1, out=buf0)
        cpp_fused_relu_0(buf1)
        return (buf1, )
'''


def test_cpp_kernels_carry_their_profiler_event_name_and_no_comment():
    addmm, relu = kernels(GraphRecord("0/0", CPP_WRAPPER))
    assert (addmm["name"], addmm["trace_name"], addmm["aten_ops"]) == ("extern_kernels.addmm", "aten::addmm",
                                                                       ["aten.t", "aten.addmm"])
    assert (relu["name"], relu["trace_name"], relu["aten_ops"]) == ("cpp_fused_relu_0", "graph_5_cpp_fused_relu_0", [])


def test_source_lines_are_the_users_innermost_frame_then_the_librarys():
    stack = ('  File "/home/me/train.py", line 30, in step\n    optimizer.step()\n'
             '  File "/usr/lib/torch/optim/adam.py", line 526, in _single_tensor_adam\n    param.addcdiv_(a, b)\n')
    assert [(s["file"], s["line"]) for s in source_lines(stack, ("/usr/lib/torch/",))] == [
        ("/home/me/train.py", 30), ("/usr/lib/torch/optim/adam.py", 526)]
    assert [s["line"] for s in source_lines(stack)] == [526]
    assert source_lines("no frames here") == []


def test_module_paths_start_at_the_root_modules_type():
    closure = "fn.__closure__[1].cell_contents"
    assert module_path(((closure, closure, "MLP"), (f"{closure}.norm", f"{closure}.norm", "LayerNorm"))) == \
        "MLP.norm (LayerNorm)"
    assert module_path((("m", "L['model']", "Sequential"), ("m0", "L['model']._modules['0']", "Linear"))) == \
        "Sequential.0 (Linear)"
    assert module_path((("m", "L['model']", "Sequential"),)) == "Sequential"
    assert module_path((("p", "L['self'].proj", "Linear"),)) == "self.proj (Linear)"  # the module's own frame
    assert module_path((("m", "L['a']", "A"), ("b", "G['other'].x[0]", "B"))) == "B"  # not a dotted path
