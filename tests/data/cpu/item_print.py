"""A model whose forward calls .item() and print: Dynamo breaks the graph twice."""
import torch
from torch import nn


class ItemPrint(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.l1 = nn.Linear(width, width)
        self.l2 = nn.Linear(width, width)
        self.l3 = nn.Linear(width, width)

    def forward(self, x):
        x = self.l1(x).relu()
        scale = x.mean().item()
        x = self.l2(x) * scale
        print("", end="")
        return self.l3(x).sin()


def workload(batch: int = 32, width: int = 64, device: str = "cpu"):
    torch.manual_seed(0)
    model = ItemPrint(width).to(device)
    return model, (torch.randn(batch, width, device=device),)
