import torch, json, sys
from torch.profiler import profile, ProfilerActivity
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.l1=torch.nn.Linear(64,64); s.l2=torch.nn.Linear(64,64)
    def forward(s,x):
        x=s.l1(x).relu()
        print("", end="")
        return s.l2(x).sin()
torch.manual_seed(0)
m=torch.compile(M())
x=torch.randn(32,64)
m(x); m(x)
stack = sys.argv[1] == "stack"
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=stack) as p:
    for i in range(2):
        with torch.profiler.record_function(f"ProfilerStep#{i}"):
            m(x)
    if not stack:
        with torch.profiler.record_function("ProfilerStep#2"):
            m(torch.randn(17,64))
p.export_chrome_trace(f"gb_{sys.argv[1]}.json")
print(sum(torch._dynamo.utils.counters["graph_break"].values()))
