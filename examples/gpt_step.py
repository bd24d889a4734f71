"""A small GPT-style training step: token and position embeddings, pre-norm blocks of causal
self-attention and a GELU MLP, a head tied to the token embedding, cross-entropy, AdamW.

In compiled mode Dynamo splits the step at `loss.backward()`: the forward, the backward and
the optimizer step become compiled graphs, with attention left to scaled_dot_product_attention.

    kerneltui capture examples/gpt_step.py -p layers=4 -p width=256
    python examples/gpt_step.py
"""

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp_norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, time, width = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(width, dim=2)
        q, k, v = (t.view(batch, time, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, time, width))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def workload(batch: int = 8, context: int = 64, width: int = 128, layers: int = 2, heads: int = 4,
             vocab: int = 512, device: str = "cuda"):
    model = GPT(vocab, context, width, layers, heads).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, vocab, (batch, context + 1), device=device)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return train_step, (x, y)


if __name__ == "__main__":
    fn, inputs = workload(device="cuda" if torch.cuda.is_available() else "cpu")
    print(f"loss {fn(*inputs).item():.4f}")
