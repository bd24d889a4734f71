"""The data layer and the viewer commands run without torch; the data layer without textual."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import sys
import kerneltui.trace, kerneltui.trace.summary, kerneltui.report, kerneltui.cli
from kerneltui.cli import build_parser
build_parser()  # every subcommand registers its arguments
from kerneltui.trace import load_trace
from kerneltui.trace.summary import summarize
summarize(load_trace("traces/add_relu_1M_eager.json.gz"))
print(sorted(m for m in ("torch", "textual") if m in sys.modules))
"""


def test_summary_path_imports_neither_torch_nor_textual():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_import_contract_holds():
    """pyproject's import-linter contract: kerneltui.trace imports no textual, torch, tui or capture."""
    out = subprocess.run(["lint-imports"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout
    assert "Contracts: 1 kept, 0 broken." in out.stdout
