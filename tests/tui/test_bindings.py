"""Every key is declared in BINDINGS with an id, shown in help, and exercised by a Pilot test."""

from __future__ import annotations

from kerneltui.tui.app import KernelTuiApp
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.goto import GotoScreen
from kerneltui.tui.screens.health import HealthScreen
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.screens.loading import LoadingScreen
from kerneltui.tui.screens.memory import MemoryScreen
from kerneltui.tui.screens.modules import ModulesScreen, ModuleTable
from kerneltui.tui.screens.overview import OverviewScreen
from kerneltui.tui.widgets.table import VirtualTable
from kerneltui.tui.widgets.timeline import Timeline

ALL = [KernelTuiApp, BrowserScreen, HelpScreen, LoadingScreen, VirtualTable, Timeline, ModulesScreen, ModuleTable,
       HealthScreen, GotoScreen, OverviewScreen, MemoryScreen]

# binding id -> the Pilot test that presses it (tests/tui/test_browser.py unless said otherwise)
COVERED = {
    "app.quit": "test_ctrl_q_quits_too",
    "help": "test_help_lists_every_key_and_closes",
    "help.close": "test_help_lists_every_key_and_closes",
    "loading.quit": "test_loading.py::test_a_bad_file_shows_the_cli_message_in_the_app",
    "quit": "test_q_quits_with_status_0",
    "filter": "test_filter_substring_regex_and_bad_regex",
    "escape": "test_escape_leaves_the_filter_then_clears_it",
    "toggle-view": "test_view_key_switches_to_every_launch_in_time_order",
    "full-names": "test_full_names_key",
    "jump": "test_jump_between_table_and_timeline",
    "zoom-in": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "zoom-out": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "pan-left": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "pan-right": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "zoom-selection": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "fit": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "previous-step": "test_step_keys_move_between_steps",
    "next-step": "test_step_keys_move_between_steps",
    "next-match": "test_explorer.py::test_n_and_N_walk_the_search_hits_in_time_order",
    "previous-match": "test_explorer.py::test_n_and_N_walk_the_search_hits_in_time_order",
    "group": "test_explorer.py::test_g_groups_by_op_module_source_and_step_with_the_data_layers_numbers",
    "back": "test_explorer.py::test_b_goes_back_after_a_jump_and_a_search_hit",
    "timeline-size": "test_explorer.py::test_e_enlarges_then_maximises_the_timeline_and_restores_it",
    "mark": "test_explorer.py::test_a_marked_range_shows_its_totals_and_scopes_the_table",
    "copy": "test_explorer.py::test_y_copies_the_full_name_of_the_selected_kernel",
    "export-csv": "test_explorer.py::test_x_and_X_export_the_table_as_shown_to_new_files",
    "export-markdown": "test_explorer.py::test_x_and_X_export_the_table_as_shown_to_new_files",
    "toggle-details": "test_details_key_hides_the_pane",
    "goto": "test_explorer.py::test_colon_goes_to_a_step_or_a_time",
    "goto.close": "test_explorer.py::test_colon_goes_to_a_step_or_a_time",
    "health": "test_health_tui.py::test_a_damaged_trace_says_so_under_the_header_and_h_shows_the_report",
    **{k: "test_overview_memory_screens.py::test_o_shows_each_steps_split_and_enter_scopes_to_that_step"
       for k in ("overview", "overview.back", "overview.focus")},
    **{k: "test_overview_memory_screens.py::test_u_shows_the_memory_chart_peaks_and_ops" for k in ("memory", "memory.back")},
    "health.close": "test_health_tui.py::test_a_damaged_trace_says_so_under_the_header_and_h_shows_the_report",
    **{k: "test_modules.py::test_t_shows_the_tree_keys_open_and_close_and_enter_scopes_to_a_node"
       for k in ("modules", "modules.open", "modules.close", "modules.open-all", "modules.back")},
    **{f"sort-{i}": "test_sort_keys_each_column_and_reverse" for i in range(1, 7)},
    **{f"toggle-{c}": "test_noise_toggles_hide_and_show_with_counts"
       for c in ("memcpy", "memset", "runtime", "cpu_op", "annotation", "memory")},
    **{f"table.{k}": "test_table_keys_move_and_enter_jumps_to_timeline"
       for k in ("up", "down", "page-up", "page-down", "first", "last", "activate")},
    "timeline.previous-event": "test_timeline_lane_keys",
    "timeline.next-event": "test_jump_between_table_and_timeline",
    "timeline.lane-up": "test_timeline_lane_keys",
    "timeline.lane-down": "test_timeline_lane_keys",
    "timeline.zoom-in": "test_timeline_keys_when_focused",
    "timeline.zoom-out": "test_timeline_keys_when_focused",
    "timeline.pan-left": "test_timeline_keys_when_focused",
    "timeline.pan-right": "test_timeline_zoom_pan_fit_and_selection_zoom",
    "timeline.zoom-selection": "test_timeline_keys_when_focused",
    "timeline.fit": "test_timeline_keys_when_focused",
    "timeline.previous-step": "test_step_keys_move_between_steps",
    "timeline.next-step": "test_step_keys_move_between_steps",
    "timeline.activate": "test_jump_between_table_and_timeline",
    "timeline.mark-range": "test_timeline_widget.py::test_mark_range_with_keys",
    "timeline.clear-range": "test_timeline_widget.py::test_mark_range_with_keys",
}


def all_bindings():
    return [b for cls in ALL for b in cls.BINDINGS]


def test_every_binding_has_an_id_and_a_description():
    for b in all_bindings():
        assert b.id, b
        assert b.description, b


def test_binding_ids_are_unique():
    ids = [b.id for b in all_bindings()]
    assert len(ids) == len(set(ids))


def test_every_binding_is_exercised_by_a_test():
    assert {b.id for b in all_bindings()} == set(COVERED)


def test_each_named_test_exists_and_presses_one_of_the_bindings_keys():
    """COVERED must not drift: the test it names is there, and its body presses the binding's key."""
    import ast
    from pathlib import Path

    here = Path(__file__).parent
    sources = {p.name: p.read_text() for p in here.glob("test_*.py")}
    bodies = {}
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bodies[f"{name}::{node.name}"] = {
                    c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
    for binding in all_bindings():
        where = COVERED[binding.id]
        qualified = where if "::" in where else f"test_browser.py::{where}"
        assert qualified in bodies, f"{binding.id}: no test {qualified}"
        keys = {k.strip() for k in binding.key.split(",")}
        strings = bodies[qualified]
        # a key pressed by name ("ctrl+q"), or one of a string of keys pressed in a loop ("3456")
        pressed = any(k in strings or (len(k) == 1 and any(k in s and len(s) <= 8 and " " not in s for s in strings))
                      for k in keys)
        assert pressed, (binding.id, keys, qualified)
