"""A whole training step: forward, cross-entropy loss, backward, AdamW step.

In compiled mode kerneltui compiles the whole step: Dynamo splits it at
`loss.backward()`, so the forward, the backward and the optimizer step each
become compiled graphs.

    kerneltui capture examples/train_step.py -p batch=256 --steps 5
    python examples/train_step.py
"""

import torch
from torch import nn


CLASSES = 10


def workload(batch: int = 64, width: int = 128, device: str = "cuda"):
    model = nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, CLASSES)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, CLASSES, (batch,), device=device)

    def train_step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return train_step, (x, y)


if __name__ == "__main__":
    fn, inputs = workload(device="cuda" if torch.cuda.is_available() else "cpu")
    print(f"loss {fn(*inputs).item():.4f}")
