"""The real `kerneltui open` in a real terminal (tmux at 80x24): keys in, capture-pane out."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.e2e.conftest import kerneltui_command

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")

TRACE = "traces/add_relu_1M_eager.json.gz"


def test_open_browse_filter_and_quit_at_80x24(terminal):
    t = terminal(f"{kerneltui_command()} open {TRACE}")
    t.wait_for("busy 0.2% of 2.49ms")
    screen = t.wait_for("t Timeline")  # the footer is drawn last
    assert screen[0] == " add_relu_1M_ea… · 2 launches · 2 kernels · busy 0.2% of 2.49ms · 1 call · H200"
    assert screen[2].startswith("Kernel ") and "Count   Total▼     Mean  Share Launched by" in screen[2]
    assert screen[3] == "vectorized…UDAFunctor_add>[f32]       1   2.27µs   2.27µs  53.4% aten::add"
    assert screen[4] == "vectorized…h_clamp_scalar>[f32]       1   1.98µs   1.98µs  46.6% aten::clamp_min"
    assert "vectorized_elementwise_kernel<CUDAFunctor_add>[f32]" in "\n".join(screen)  # details title
    # every key whole: the palette (listed in help) gives way to T at 80 columns
    assert screen[-1].rstrip() == " ? Help  / Search  v View  T Modules  o Overview  g Group  t Timeline  q Quit"

    t.keys("v")
    screen = t.wait_for("Start▲")
    assert screen[3].split() == ["2.28ms", "2.27µs", "s7", "1", "vectorized…<CUDAFunctor_add>[f32]", "aten::add"]

    t.keys("/", "clamp")  # typed at once: the keys after / must reach the filter box
    screen = t.wait_for("1 kernel · 1/2 launches · 1.98µs GPU (46.6%)")
    assert screen[3].split()[:4] == ["2.38ms", "1.98µs", "s7", "1"]
    t.keys("Escape")
    time.sleep(0.3)
    t.keys("Escape")
    t.wait_for("2 kernels · 2/2 launches · 4.26µs GPU")

    t.keys("?")
    screen = t.wait_for("escape closes")
    assert any("Switch between the kernel table and every launch" in line for line in screen)
    t.keys("Escape")  # alone: Escape then q at once reads as alt+q
    t.wait_for("/ search")
    t.keys("q")
    screen = t.wait_for("EXIT=")
    assert "EXIT=0" in screen


def test_open_of_a_missing_file_says_why_and_exits_2(terminal):
    """On a terminal too: one line and exit 2, no full screen to show it and wait for q."""
    t = terminal(f"{kerneltui_command()} open traces/no_such_trace.json.gz")
    screen = t.wait_for("EXIT=")
    said = [line for line in screen if line.strip()]
    assert said[-2:] == ["kerneltui: traces/no_such_trace.json.gz: no such file", "EXIT=2"]


def test_no_color_terminal_still_marks_the_cursor(terminal):
    t = terminal(f"{kerneltui_command()} {TRACE}", env="NO_COLOR=1")  # `kerneltui TRACE` is `open`
    plain = t.wait_for("t Timeline")
    out = t.tmux("capture-pane", "-p", "-e", "-t", t.name).stdout
    at = next(i for i, line in enumerate(plain) if "UDAFunctor_add>[f32]" in line and "2.27" in line)
    cursor_line = out.splitlines()[at]
    assert "\x1b[7m" in cursor_line  # reverse video: visible without colour
    assert "\x1b[7m" not in out.splitlines()[at + 1]
    t.keys("q")
    assert "EXIT=0" in t.wait_for("EXIT=")


GPT = "tests/data/traces/gpt_train_eager.json.gz"


def test_search_by_op_n_group_by_module_range_and_copy_at_120x40(terminal):
    """What a user does over SSH: find the GEMMs aten::mm launched, walk them, group, measure a range, copy."""
    t = terminal(f"{kerneltui_command()} open {GPT}", width=120, height=40)
    t.tmux("set-option", "-g", "set-clipboard", "on", check=True)  # accept OSC 52 into a buffer
    t.wait_for("t Timeline")
    t.keys("/", "aten::mm", "Enter")
    screen = t.wait_for("120/945 launches · 2.81ms GPU (23.8%)")
    first = next(line for line in screen if "starts " in line)
    t.keys("n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(line == first for line in t.screen()):
        time.sleep(0.1)
    screen = t.screen()
    assert first not in screen  # another launch is shown...
    op = next(i for i, line in enumerate(screen) if line.strip().startswith("op "))
    assert "aten::mm" in " ".join(screen[op:op + 2])  # ...and aten::mm launched it too
    t.keys("g", "g")
    screen = t.wait_for("Module ")
    # the GEMMs aten::mm ran, forward and backward, on the modules of the forward ops they differentiate
    assert any(line.startswith("TinyGPT_0.") for line in screen) and not any("(no module)" in line for line in screen)
    t.keys("Escape")  # leave nothing pending; the search stays
    t.keys("t", "m", "Right", "Right", "m")
    screen = t.wait_for("range ")
    line = next(line for line in screen if line.startswith(" range "))
    assert "GPU busy" in line and "kernel" in line
    t.keys("y")
    t.wait_for("copied:")
    buffer = t.tmux("show-buffer").stdout
    assert buffer.startswith("void ") or buffer.startswith("nvjet_") or "Memset" in buffer or "kernel" in buffer
    t.keys("q")
    assert "EXIT=0" in t.wait_for("EXIT=")
