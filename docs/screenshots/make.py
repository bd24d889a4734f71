"""Regenerate the README's and docs' screenshots: the real apps, headless, on the shipped traces.

    python docs/screenshots/make.py

Each shot is (file, app, size, keys pressed after loading). Look at them before committing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tui.helpers import settle, wait_for_diff  # noqa: E402

DATA = "tests/data/traces"
OLD = "tests/data/external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"
BROWSER = [
    ("browser-gpt_train-160x45.svg", f"{DATA}/gpt_train_eager.json.gz", (160, 45),
     ["slash", *"aten::mm", "enter", "n", "n", "t", "z"]),
    ("browser-gpt_train-module-range-160x45.svg", f"{DATA}/gpt_train_eager.json.gz", (160, 45),
     ["g", "g", "t", "plus", "plus", "m", "right", "right", "right", "right", "m"]),
    ("browser-mlp_bf16-80x24.svg", f"{DATA}/mlp_bf16_eager.json.gz", (80, 24), []),
    ("browser-gpt_train-modules-80x24.svg", f"{DATA}/gpt_train_eager.json.gz", (80, 24), ["T", "down", "right"]),
    # o: each step's split, the figures and what to try next; u: memory over time, per step, by op
    ("browser-resnet18-overview-120x40.svg", f"{DATA}/resnet18_train_eager.json.gz", (120, 40), ["o"]),
    ("browser-gpt_train-overview-80x24.svg", f"{DATA}/gpt_train_eager.json.gz", (80, 24), ["o"]),
    ("browser-gpt_train-memory-120x40.svg", f"{DATA}/gpt_train_eager.json.gz", (120, 40), ["u"]),
    ("browser-resnet18-120x40.svg", f"{DATA}/resnet18_train_eager.json.gz", (120, 40), ["g"]),
    # a torch 1.8 trace whose first 733 GPU events have no launch call: the health line, then its report
    ("browser-torch18-damaged-80x24.svg", OLD, (80, 24), []),
    ("browser-torch18-health-120x40.svg", OLD, (120, 40), ["H"]),
    # a CPU capture (no GPU): its compiled C++ kernel by CPU self time, with what it computes and where
    ("browser-cpu-add_relu-80x24.svg", "tests/data/cpu/add_relu_n1000000_compiled.json.gz", (80, 24), []),
]
DIFF = [
    ("diff-add_relu_1M-80x24.svg", "traces/add_relu_1M_eager.json.gz", "traces/add_relu_1M_compiled.json.gz", (80, 24)),
    ("diff-add_relu_1M-160x40.svg", "traces/add_relu_1M_eager.json.gz", "traces/add_relu_1M_compiled.json.gz",
     (160, 40)),
    ("diff-add_relu_100-launch-bound.svg", f"{DATA}/add_relu_100_eager.json.gz",
     f"{DATA}/add_relu_100_compiled.json.gz", (80, 24)),
    ("diff-mlp_bf16-160x40.svg", f"{DATA}/mlp_bf16_eager.json.gz", f"{DATA}/mlp_bf16_compiled.json.gz", (160, 40)),
    ("diff-resnet18_train-80x24.svg", f"{DATA}/resnet18_train_eager.json.gz",
     f"{DATA}/resnet18_train_compiled.json.gz", (80, 24)),
    ("diff-resnet18_train-160x45.svg", f"{DATA}/resnet18_train_eager.json.gz",
     f"{DATA}/resnet18_train_compiled.json.gz", (160, 45)),
    ("diff-resnet18_train-row-80x24.svg", f"{DATA}/resnet18_train_eager.json.gz",
     f"{DATA}/resnet18_train_compiled.json.gz", (80, 24), ["enter"]),
    ("diff-mlp_bf16-verdict-120x40.svg", f"{DATA}/mlp_bf16_eager.json.gz", f"{DATA}/mlp_bf16_compiled.json.gz",
     (120, 40), ["i"]),
    # a training step compiled whole on an H200 (`kerneltui capture`): the optimizer's row, opened
    ("diff-train_step-h200-row-120x40.svg", "traces/train_step_batch64_width128_eager.json.gz",
     "traces/train_step_batch64_width128_compiled.json.gz", (120, 40), ["enter"]),
]


async def browser_shot(name, path, size, keys):
    from kerneltui.tui.app import build_app

    app = build_app(str(ROOT / path))
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause(0.5)
        (ROOT / "docs/screenshots" / name).write_text(app.export_screenshot(title=name.removesuffix(".svg")))


async def diff_shot(name, a, b, size, keys=()):
    from kerneltui.tui.diff.app import build_app

    app = build_app(str(ROOT / a), str(ROOT / b))
    async with app.run_test(size=size) as pilot:
        await wait_for_diff(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause(0.5)
        (ROOT / "docs/screenshots" / name).write_text(app.export_screenshot(title=name.removesuffix(".svg")))


RANKS = [("ranks-8-ranks-80x24.svg", (80, 24), []), ("ranks-8-ranks-zoomed-160x45.svg", (160, 45),
          ["down", "down", "down", "plus", "plus", "plus", "plus"])]


async def ranks_shot(name, size, keys):
    """An 8-rank job made from a real DDP rank (tests/support/rank_job.py, seed 0, straggler rank 3)."""
    import tempfile

    from kerneltui.tui.ranks.app import build_ranks_app
    from kerneltui.tui.ranks.screen import RanksScreen
    from tests.support.rank_job import make_job

    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job"
        make_job(job, ranks=8, straggler=3, seed=0, end_noise_ns=10_000)
        app = build_ranks_app([str(job)], cache=False)
        async with app.run_test(size=size) as pilot:
            for _ in range(400):
                await pilot.pause(0.05)
                if isinstance(app.screen, RanksScreen):
                    break
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            await pilot.pause(0.5)
            (ROOT / "docs/screenshots" / name).write_text(app.export_screenshot(title=name.removesuffix(".svg")))


async def main() -> None:
    for shot in RANKS:
        await ranks_shot(*shot)
        print("wrote", shot[0])
    for shot in BROWSER:
        await browser_shot(*shot)
        print("wrote", shot[0])
    for shot in DIFF:
        await diff_shot(*shot)
        print("wrote", shot[0])


if __name__ == "__main__":
    asyncio.run(main())
