"""Memory over time as text: a cell holds the highest total in effect in it (tui/memory_paint.py)."""

from __future__ import annotations

import numpy as np

from kerneltui.tui.memory_paint import chart_rows, column_peaks, short_bytes, sparkline


def test_a_cell_holds_the_total_carried_in_or_the_highest_event_inside_it():
    ts = np.array([15, 22, 27, 61])
    values = np.array([100, 400, 50, 300])
    edges = np.arange(0, 80, 10)  # cells [0,10) [10,20) ... [60,70)
    # [0,10) before any event: -1; [10,20) has 100; [20,30) 400 and 50 (and 100 carried in): 400;
    # [30,60) nothing new: 50 carried; [60,70) 50 carried in, 300 inside
    assert column_peaks(ts, values, edges).tolist() == [-1, 100, 400, 50, 50, 50, 300]


def test_an_event_on_a_cell_edge_belongs_to_the_later_cell_and_a_short_peak_survives_zooming_out():
    assert column_peaks(np.array([10]), np.array([7]), np.array([0, 10, 20])).tolist() == [-1, 7]
    ts = np.array([0, 5, 6, 1000])  # a 1 ns spike to 900 inside one wide cell
    values = np.array([10, 900, 10, 20])
    assert column_peaks(ts, values, np.array([0, 500, 1001])).tolist() == [900, 20]
    assert column_peaks(np.array([], np.int64), np.array([], np.int64), np.array([0, 5])).tolist() == [-1]


def test_the_sparkline_is_eighths_of_the_scale_and_blank_where_unknown():
    assert sparkline(np.array([-1, 0, 100, 450, 800]), 800) == " ▁▁▅█"


def test_the_chart_draws_allocated_in_eighths_and_the_reserved_pool_above_it():
    rows = chart_rows(np.array([800, 200, -1]), np.array([800, 800, -1]), 800, 2)
    # 2 rows of 8 eighths: 800 -> 16 eighths, 200 -> 4, reserved 800 -> 16
    assert ["".join(c for c, _ in r) for r in rows] == ["█░ ", "█▄ "]
    assert [k for _, k in rows[0]] == ["allocated", "reserved", ""]


def test_short_bytes_fits_the_timeline_margin():
    assert [short_bytes(n) for n in (1_514_776_576, 2_500_000, 512)] == ["1.5G", "2.5M", "512B"]
