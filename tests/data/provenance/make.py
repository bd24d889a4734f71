# ruff: noqa - a generator script: the tests assert its line numbers (tests/capture/test_provenance_layouts.py)
import os, sys, torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dump import run
from torch._inductor.scheduler import Scheduler

which = sys.argv[1]

@torch.library.custom_op("kt::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2
@scale.register_fake
def _(x):
    return torch.empty_like(x)
def _bw(ctx, g):
    return g * 2
scale.register_autograd(_bw)

class Part(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 8)
        self.down = nn.Linear(8, 8)
    def forward(self, x):
        h = torch.relu(self.up(x))
        h = scale(h)
        return torch.sigmoid(self.down(h)) + 1

if which == "partition":
    # CPU nodes are never cudagraphable: pretend they are, so the partition codegen of a CUDA graph
    # capture runs, split at a custom op as cudagraph-unsafe ops split it
    orig = Scheduler.should_partition
    def should_partition(self, node):
        r = orig(self, node)
        return r if r is None or r.startswith("custom") else None
    Scheduler.should_partition = should_partition
    torch.manual_seed(0)
    m = Part()
    run("partition", m, (torch.randn(4, 8, requires_grad=True),),
        {"triton.cudagraphs": True, "custom_should_partition_ops": ["kt::scale"]})

class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
    def forward(self, x):
        def yes(x):
            return torch.relu(x) * 2
        def no(x):
            return torch.sigmoid(x) + 1
        return torch.cond(x.sum() > 0, yes, no, (self.lin(x),)).cos()

if which == "cond":
    torch.manual_seed(0)
    with torch.no_grad():
        run("cond", Cond(), (torch.randn(4, 8),))

@torch.compiler.nested_compile_region
def block(x, w):
    return torch.relu(x @ w).sin()

def twice(x, w):
    return block(block(x, w), w).sum(dim=1)

if which == "subgraph":
    with torch.no_grad():
        run("subgraph", twice, (torch.randn(4, 8), torch.randn(8, 8)))

class Attention(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.heads = heads
    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        weights = scores.softmax(dim=-1)
        out = torch.matmul(weights, v)
        return out.transpose(1, 2).reshape(b, t, d)

if which == "attention":
    torch.manual_seed(0)
    with torch.no_grad():
        run("attention", Attention(), (torch.randn(2, 8, 16),))
if which == "attention_train":
    torch.manual_seed(0)
    run("attention_train", Attention(), (torch.randn(2, 8, 16, requires_grad=True),))

class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = torch.relu(x)
        x = self.conv2(x)
        x = self.bn2(x)
        return x.sum()

if which == "convbn":
    torch.manual_seed(0)
    run("convbn", ConvBN(), (torch.randn(2, 3, 8, 8, requires_grad=True),))

if which == "combo":
    def f(a, b, c):
        return a.relu(), b.sin(), c.cos() + 1
    with torch.no_grad():
        run("combo", f, (torch.randn(64), torch.randn(32), torch.randn(16)), {"combo_kernels": True})

if which == "gpu_partition":
    # On a GPU (not run yet: no GPU lent): reduce-overhead's CUDA graphs make real partitions, split at the custom op
    torch.manual_seed(0)
    run("gpu_partition", Part().cuda(), (torch.randn(4, 8, device="cuda", requires_grad=True),),
        {"custom_should_partition_ops": ["kt::scale"]}, mode="reduce-overhead")
