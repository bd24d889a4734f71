"""T in the browser: the module tree, opened and closed by keys, and enter scoping the table and timeline."""

from __future__ import annotations

import numpy as np

from kerneltui.analysis.attribution import places
from kerneltui.analysis.modules import module_tree
from kerneltui.trace import load_trace
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.modules import ModulesScreen, ModuleTable
from kerneltui.tui.widgets.details import DetailsPane
from tests.conftest import shared_trace
from tests.tui.helpers import opened, parts, rows, screen_text


async def test_t_shows_the_tree_keys_open_and_close_and_enter_scopes_to_a_node():
    async with opened(shared_trace("gpt_train_eager")) as (app, pilot):
        await pilot.press("T")
        assert isinstance(app.screen, ModulesScreen)
        tree = app.screen.query_one(ModuleTable)
        names = [r[0] for r in rows(tree)]
        # the roots open: the model's blocks and layers one level down, then the loss and the optimizer
        assert names[:2] == ["▾ TinyGPT_0", "  ▸ Block_1"]
        assert names[-2:] == ["· loss", "· optimizer (AdamW)"]
        assert rows(tree)[0][1:6] == ["2.92ms", "6.70ms", "9.63ms", "903", "81.4%"]
        await pilot.press("down", "right")  # open Block_1
        names = [r[0] for r in rows(tree)]
        assert names[2:4] == ["    ▸ Sequential_1", "    · Linear_4"]
        await pilot.press("left")  # close it again
        assert [r[0] for r in rows(tree)][2] == "  ▸ Block_3"
        await pilot.press("asterisk")  # open all: every node of the tree
        assert tree.row_count() == len(app.screen.modules.nodes) == 43
        await pilot.press("escape")
        assert isinstance(app.screen, BrowserScreen) and app.screen.query_state.module == ""
        await pilot.press("T", "down", "right", "down", "enter")  # Block_1 › Sequential_1
        screen, table, _, timeline = parts(app)
        assert isinstance(screen, BrowserScreen)
        assert screen.query_state.module == "TinyGPT_0.Block_1.Sequential_1"
        trace = screen.kernels.trace
        placed = places(trace)
        mine = (placed == "TinyGPT_0.Block_1.Sequential_1") | np.char.startswith(
            placed.astype(str), "TinyGPT_0.Block_1.Sequential_1.")
        # the table and the timeline hold that module's launches: forward and backward, 72 over 3 steps
        assert int(mine.sum()) == 72 and screen.keep is not None and int(screen.keep.sum()) == 72
        counts = str(screen.query_one("#counts").render())
        assert counts == " in Sequential_1 · 12 kernels · 72/945 · 893.9µs"  # 80 columns: the counts shortened
        await pilot.press("T")  # the tree opens on the node in scope
        tree = app.screen.query_one(ModuleTable)
        assert tree.path_at(tree.cursor) == "TinyGPT_0.Block_1.Sequential_1"
        await pilot.press("q")
        await pilot.press("w")  # the whole trace again: the module scope goes
        assert app.screen.query_state.module == "" and app.screen.keep is None


async def test_the_tree_screen_is_kept_between_presses_and_goes_with_its_browser():
    """The browser installs the tree's screen on the first T and shows that same screen on later
    ones (a T at 1M launches: 63 -> 20 ms), on the node now in scope; it goes when the browser goes."""
    async with opened(shared_trace("gpt_train_eager")) as (app, pilot):
        browser = app.screen
        await pilot.press("T")
        first = app.screen
        assert isinstance(first, ModulesScreen) and app.is_screen_installed(first)
        await pilot.press("down", "right", "down", "enter")  # Block_1 › Sequential_1
        assert app.screen is browser and browser.query_state.module == "TinyGPT_0.Block_1.Sequential_1"
        await pilot.press("T")
        assert app.screen is first
        tree = first.query_one(ModuleTable)
        assert tree.path_at(tree.cursor) == "TinyGPT_0.Block_1.Sequential_1"
        await pilot.press("escape", "w", "T")  # the whole trace: the same screen, on its top row
        assert app.screen is first and tree.cursor == 0
        await pilot.press("escape")
        app.switch_screen(ModulesScreen(first.modules))  # the browser replaced: removed, and its tree's screen
        await pilot.pause()
        assert not browser.is_attached and not app.is_screen_installed(first)


async def test_the_details_say_where_a_launch_is_placed():
    async with opened(shared_trace("gpt_train_eager"), size=(160, 45)) as (app, pilot):
        screen = app.screen
        trace = screen.kernels.trace
        g = trace.gpu
        launch = int(np.flatnonzero(g["op"].astype(str).to_numpy() == "aten::_fused_adamw_")[0])
        screen.select_launch(launch, source=None)
        await pilot.pause()
        text = "\n".join(screen_text(screen.query_one(DetailsPane)))
        assert "placed on optimizer (AdamW)" in " ".join(text.split())
        backward = int(np.flatnonzero((g["op"].astype(str).to_numpy() == "aten::mm"))[-1])
        screen.select_launch(backward, source=None)
        await pilot.pause()
        text = " ".join("\n".join(screen_text(screen.query_one(DetailsPane))).split())
        # a weight gradient's GEMM, on the Linear whose forward addmm made its autograd node
        assert ("placed on TinyGPT_0.Block_0.Linear_0 (backward of aten::addmm at gpu_corpus.py(235): forward)"
                in text)


async def test_without_stacks_the_tree_is_by_forward_op():
    async with opened(shared_trace("resnet18_train_eager")) as (app, pilot):
        await pilot.press("T")
        tree = app.screen.query_one(ModuleTable)
        assert rows(tree)[0][0] == "· aten::conv2d #1"
        head = str(app.screen.query_one("#modules-head").render())
        assert "capture with with_stack=True" in " ".join(head.split())
        assert tree.row_count() == len(module_tree(load_trace(shared_trace("resnet18_train_eager"))).nodes) == 91
