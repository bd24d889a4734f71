"""Pictures of the browser at 80x24 and wide, compared with baselines someone looked at.

Update after looking at the report: pytest tests/tui/test_snapshots.py --snapshot-update
Nothing on screen depends on the clock: the load finishes before the picture is taken.
"""

from __future__ import annotations

from kerneltui.tui.app import build_app
from tests.conftest import shared_trace
from tests.tui.helpers import settle

NARROW, WIDE = (80, 24), (160, 45)


def run_before(*keys: str):
    async def before(pilot) -> None:
        await settle(pilot.app, pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return before


def test_kernels_80x24(snap_compare):
    app = build_app(str(shared_trace("mlp_bf16_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before())


def test_kernels_wide(snap_compare):
    app = build_app(str(shared_trace("mlp_bf16_eager")))
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before())


def test_launches_zoomed_timeline_80x24(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before("v", "R", "t", "z"))


def test_filtered_wide(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    keys = ("slash", *"nvjet", "enter", "down", "down", "plus", "plus")
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before(*keys))


def test_help_80x24(snap_compare):
    app = build_app(str(shared_trace("mlp_bf16_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before("question_mark"))


def test_load_error_80x24(snap_compare):
    app = build_app("traces/no_such_trace.json.gz")
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before())


def test_module_tree_80x24(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before("T", "down", "right"))


def test_module_tree_wide(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before("T", "asterisk"))


def test_scoped_to_a_module_wide(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    keys = ("T", "down", "right", "down", "enter", "g", "g")  # Block_1's Sequential_1, grouped by module
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before(*keys))


def test_overview_80x24(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before("o"))


def test_overview_wide(snap_compare):
    app = build_app(str(shared_trace("resnet18_train_eager")))
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before("o"))


def test_memory_80x24(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before("u"))


def test_memory_wide(snap_compare):
    app = build_app(str(shared_trace("gpt_train_eager")))
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before("u"))
