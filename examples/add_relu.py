"""The article's workload: one add and one relu over two float32 vectors.

Eager PyTorch runs two kernels (add, then relu); torch.compile fuses them into one.

    kerneltui capture examples/add_relu.py                    # n = 1,000,000
    kerneltui capture examples/add_relu.py --sweep n=100,1e6,1e8
    python examples/add_relu.py                               # one call, no profiler
"""

import torch


def add_relu(a, b):
    return (a + b).relu()


def workload(n: int = 1_000_000, device: str = "cuda"):
    a = torch.randn(n, device=device)
    b = torch.randn(n, device=device)
    return add_relu, (a, b)


if __name__ == "__main__":
    fn, inputs = workload(device="cuda" if torch.cuda.is_available() else "cpu")
    print(fn(*inputs))
