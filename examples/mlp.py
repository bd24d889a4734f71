"""A small MLP block as an nn.Module: LayerNorm -> Linear -> GELU -> Linear, plus residual.

Forward only, under no_grad, as in inference.

    kerneltui capture examples/mlp.py -p width=1024 -p tokens=8192
    python examples/mlp.py
"""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def workload(width: int = 256, tokens: int = 512, device: str = "cuda"):
    model = MLP(width, 4 * width).to(device).eval()
    x = torch.randn(tokens, width, device=device)

    @torch.no_grad()
    def forward(x):
        return model(x)

    return forward, (x,)


if __name__ == "__main__":
    fn, inputs = workload(device="cuda" if torch.cuda.is_available() else "cpu")
    print(fn(*inputs).shape)
