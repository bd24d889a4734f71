"""A key repaints what it changed: the details pane the lines a move changed, a scrollbar only when its
thumb is drawn elsewhere; and what is on screen then is what a whole redraw shows."""

from __future__ import annotations

import pytest

from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.launch_list import LaunchList
from kerneltui.tui.widgets.quiet import QuietScrollBar
from tests.kineto_builder import TraceBuilder
from tests.tui.helpers import opened

LAUNCHES = 4000


@pytest.fixture(scope="module")
def many_launches(tmp_path_factory):
    """4,000 launches of 7 kernels by 3 ops: far more rows than a screen."""
    b = TraceBuilder()
    with b.step():
        for i in range(LAUNCHES):
            b.op(f"aten::op{i % 3}", kernels=[(f"kernel_{i % 7}", 2.0 + i % 5)])
    return b.write(tmp_path_factory.mktemp("quiet") / "many.json")


@pytest.fixture(scope="module")
def deep_stacks(tmp_path_factory):
    """300 launches under op stacks 0-8 deep, with names of many lengths: details of many lengths, some
    taller than the pane at 160x45 (its scrollbar comes and goes), some with names that wrap."""
    b = TraceBuilder()

    def nest(i: int, level: int, depth: int) -> None:
        if level == depth:
            kernel = f"kernel_{i % 5}" + ("_" + "x" * (20 + 37 * (i % 4))) * (i % 3)
            b.op(f"aten::op{i % 3}" + "_long_name" * (i % 4), kernels=[(kernel, 2.0 + i % 5)])
            return
        with b.region(f"module.layer{level}.block{i % 4}" + ".sub" * (i % 6)):
            nest(i, level + 1, depth)

    with b.step():
        for i in range(300):
            nest(i, 0, (i * 7) % 9)
    return b.write(tmp_path_factory.mktemp("quiet") / "deep.json")


async def settled(app, pilot) -> None:
    """Until what a key set going (the lanes' cut on a thread, a relayout, later repaints) is done: a count
    of what the next key draws must not hold this one's."""
    await app.workers.wait_for_complete()
    for _ in range(3):
        await pilot.pause()


async def whole_redraw(app, pilot) -> str:
    """The screen after every widget, and every scrollbar (outside the widget tree), drew itself again."""
    for widget in app.screen.walk_children():
        widget.refresh()
        for bar in widget._get_virtual_dom():
            bar.refresh()
    await pilot.pause()
    return app.export_screenshot()


def count_calls(monkeypatch, cls, name: str) -> list:
    calls = []
    original = getattr(cls, name)

    def counted(self, *args):
        calls.append(self)
        return original(self, *args)

    monkeypatch.setattr(cls, name, counted)
    return calls


async def test_a_move_redraws_the_details_lines_it_changed(many_launches, monkeypatch):
    async with opened(many_launches, size=(160, 45)) as (app, pilot):
        await pilot.press("v")  # every launch: the next one is another kernel, the same op stack depth
        await settled(app, pilot)
        pane = app.screen.query_one(DetailsPane)
        lines_before, title = list(pane._lines), pane.details.title
        drawn = count_calls(monkeypatch, DetailsPane, "render_line")
        await pilot.press("down")
        await pilot.pause()
        changed = sum(a != b for a, b in zip(lines_before, pane._lines))
        assert pane.details.title == f"kernel_{(int(title[-1]) + 1) % 7}"
        assert len(pane._lines) == len(lines_before) and 0 < changed < len(pane._lines)
        # the changed lines and nothing else: not the unchanged ones, not the blank rest of the pane
        assert len(drawn) == changed < pane.size.height
        shown = app.export_screenshot()
        assert shown == await whole_redraw(app, pilot)


async def test_details_of_other_lengths_leave_nothing_behind(deep_stacks):
    async with opened(deep_stacks, size=(160, 45)) as (app, pilot):
        await pilot.press("v")
        pane = app.screen.query_one(DetailsPane)
        lengths, heights, bars, scrolled = set(), set(), set(), 0
        for _ in range(24):
            if pane.show_vertical_scrollbar:  # a move made with the pane scrolled to its end
                pane.scroll_end(animate=False, immediate=True)
                await pilot.pause()
                scrolled += 1
            await pilot.press("down")
            await pilot.pause()
            lengths.add(len(pane._lines))
            heights.add(pane.virtual_size.height)
            bars.add(pane.show_vertical_scrollbar)
            assert app.export_screenshot() == await whole_redraw(app, pilot)
            width = pane.scrollable_content_region.width
            assert all(len(label + value) <= width for label, value, _ in pane._lines)  # wrapped as drawn
            if pane.show_vertical_scrollbar:  # the thumb where the pane is, also after the bar was hidden
                assert pane.vertical_scrollbar.position == pane.scroll_y
        assert len(lengths) > 3 and len(heights) > 1 and bars == {True, False} and scrolled > 3


async def test_a_name_is_wrapped_to_the_width_left_by_the_scrollbar_it_brings(deep_stacks):
    """The pane's lines are wrapped before it knows whether they need its scrollbar, which takes a column."""
    async with opened(deep_stacks, size=(160, 45)) as (app, pilot):
        await pilot.press("v")
        pane = app.screen.query_one(DetailsPane)
        for _ in range(24):
            shown = pane.show_vertical_scrollbar
            await pilot.press("down")
            await pilot.pause()
            if pane.show_vertical_scrollbar and not shown:
                break
        else:
            pytest.fail("no move brought the pane's scrollbar")
        width = pane.scrollable_content_region.width
        title = [value for _, value, kind in pane._lines if kind == "details--title"]
        assert "".join(title) == pane.details.title.replace(" ", "") or " ".join(title) == pane.details.title
        assert max(len(part) for part in title) <= width


async def test_a_scrollbar_is_redrawn_only_when_its_thumb_moves(many_launches, monkeypatch):
    async with opened(many_launches, size=(160, 45)) as (app, pilot):
        await pilot.press("v")
        await settled(app, pilot)
        launches = app.screen.query_one(LaunchList)
        assert launches.row_count() == LAUNCHES
        bar = launches.vertical_scrollbar
        assert isinstance(bar, QuietScrollBar) and bar.display
        drawn = count_calls(monkeypatch, QuietScrollBar, "render")
        thumb = bar.thumb()
        await pilot.press("pagedown")  # ~30 rows of 4,000: the thumb moves by less than an eighth of a cell
        await pilot.pause()
        assert launches.scroll_offset.y > 0 and bar.thumb() == thumb
        assert bar not in drawn
        await pilot.press("end")
        await pilot.pause()
        assert bar.thumb() != thumb and bar in drawn
        track = bar.thumb()[0]
        assert bar.thumb()[2] == track * 8  # the thumb ends at the track's end
        assert app.export_screenshot() == await whole_redraw(app, pilot)
        for _ in range(40):  # page by page back up: wherever the thumb stops, it is drawn there
            await pilot.press("pageup")
        await pilot.pause()
        assert app.export_screenshot() == await whole_redraw(app, pilot)
