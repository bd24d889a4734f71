"""The browser's pure parts: layout, back history, export files."""

from __future__ import annotations

import pandas as pd

from kerneltui.tui.export import as_markdown, export_name, write_new
from kerneltui.tui.history import History, Place
from kerneltui.tui.layout import browser_layout


def test_details_sit_beside_the_table_from_160_columns_and_below_under_it():
    assert browser_layout(200, 50, 40, 12).details_beside
    narrow = browser_layout(159, 50, 40, 12)
    assert not narrow.details_beside and narrow.details_rows == 10
    assert browser_layout(80, 24, 40, 12).details_rows == 6


def test_80x24_keeps_the_table_usable_and_the_timeline_at_five_rows():
    layout = browser_layout(80, 24, 60, 12)
    # 24 - 5 fixed rows = 19: 5 timeline rows (30 %), 6 details, 8 for the table
    assert (layout.timeline_rows, layout.details_rows) == (5, 6)
    assert 19 - layout.timeline_rows - layout.details_rows == 8


def test_a_short_table_gives_its_empty_rows_to_the_timeline():
    # 120x40, a table of 6 rows (header + 5) and a timeline that wants 25: it gets what the table leaves
    layout = browser_layout(120, 40, 6, 25)
    assert layout.timeline_rows == 35 - 6 - 10
    # ...but never more than its lanes need
    assert browser_layout(120, 40, 6, 7).timeline_rows == 7


def test_timeline_modes_enlarge_and_maximise():
    normal = browser_layout(120, 40, 60, 30)
    large = browser_layout(120, 40, 60, 30, mode="large")
    full = browser_layout(120, 40, 60, 30, mode="max")
    assert normal.timeline_rows == 10 and large.timeline_rows == 21
    assert full.timeline_rows == 35 and not full.table_shown


def test_history_goes_back_in_order_and_keeps_a_repeat_once():
    h = History()
    a = Place(1, "kernels", (0, 10), "kernels")
    b = Place(5, "launches", (2, 4), "timeline")
    h.push(a)
    h.push(a)
    h.push(b)
    assert len(h) == 2
    assert h.pop() == b and h.pop() == a and h.pop() is None


def test_export_never_overwrites_and_names_come_from_the_trace(tmp_path):
    name = export_name("traces/gpt_train_eager.json.gz", "by-op-ProfilerStep#3")
    assert name == "kerneltui-gpt_train_eager-by-op-ProfilerStep_3"
    (tmp_path / f"{name}.csv").write_text("mine")
    first = write_new(tmp_path, name, ".csv", "a,b\n1,2\n")
    second = write_new(tmp_path, name, ".csv", "a,b\n3,4\n")
    assert (tmp_path / f"{name}.csv").read_text() == "mine"  # the user's file is untouched
    assert first.name == f"{name}-2.csv" and first.read_text() == "a,b\n1,2\n"
    assert second.name == f"{name}-3.csv" and second.read_text() == "a,b\n3,4\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}-2.csv", f"{name}-3.csv", f"{name}.csv"]


def test_markdown_escapes_pipes_and_control_characters():
    text = as_markdown(["Kernel", "Count"], [["a|b\x1b[31m", "3"]], title="# t")
    assert text == "# t\n\n| Kernel | Count |\n|---|---|\n| a\\|b\\x1b[31m | 3 |\n"


def test_csv_of_a_frame_is_exact():
    frame = pd.DataFrame({"Kernel": ["void f<int>(int, float)"], "total_ns": [1234]})
    from kerneltui.tui.export import as_csv

    assert as_csv(frame) == 'Kernel,total_ns\n"void f<int>(int, float)",1234\n'
