"""`summary` reads the trace while it imports pandas and its analyses, and builds its tables on two threads
at once; it reports as before."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kerneltui.cli import main
from kerneltui.commands import load_ahead
from kerneltui.trace.model import load_trace

ROOT = Path(__file__).resolve().parents[2]
EAGER = ROOT / "tests" / "data" / "traces" / "add_relu_1M_eager.json.gz"

WATCHED = """
import sys
import kerneltui.trace.cache as cache
real = cache.load
def load(*args, **kwargs):
    print("pandas imported when the read began:", "pandas" in sys.modules, file=sys.stderr, flush=True)
    return real(*args, **kwargs)
cache.load = load
from kerneltui.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("extra", [[], ["--health"], ["--overview"], ["--memory"], ["--by", "module"]])
def test_summary_reads_the_trace_before_pandas_is_imported(extra):
    done = subprocess.run([sys.executable, "-c", WATCHED, "summary", str(EAGER), "--no-cache", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert "pandas imported when the read began: False" in done.stderr
    assert done.returncode == 0, done.stderr


def test_summary_json_read_ahead_counts_what_torch_counted(capsys):
    truth = json.loads((ROOT / "tests" / "data" / "traces" / "add_relu_1M_eager.truth.json").read_text())
    assert main(["summary", str(EAGER), "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    counted = {k["full_name"]: k["count"] for k in doc["kernels"]}
    assert counted == {k["key"]: k["count"] for k in truth["key_averages"] if k["device_type"] == "DeviceType.CUDA"}
    assert sum(counted.values()) == truth["n_device_events"] == 2
    assert doc["trace"]["events"] == len(load_trace(EAGER, cache=False).events)


def test_the_read_ahead_loader_makes_the_trace_the_model_makes():
    ahead, plain = load_ahead.load_trace(EAGER, cache=False), load_trace(EAGER, cache=False)
    assert ahead.events.equals(plain.events) and ahead.names == plain.names and ahead.meta == plain.meta


def test_a_missing_trace_is_one_line_and_a_failure_with_the_read_ahead(capsys):
    assert main(["summary", str(EAGER) + ".missing", "--no-cache"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0]


def test_summary_json_builds_the_gpu_table_once_while_the_memory_table_is_made(monkeypatch, capsys):
    """The memory table (which does not read the GPU table) starts on the second thread while this
    one builds the GPU table; the summary and health there wait for it rather than build it again."""
    from kerneltui.analysis import memory
    from kerneltui.trace import model, summary

    gpt = ROOT / "tests" / "data" / "traces" / "gpt_train_eager.json.gz"
    memory_started, built = threading.Event(), []
    real_memory, real_gpu = memory.memory_table, model.gpu_table

    def memory_table(trace):
        memory_started.set()
        return real_memory(trace)

    def gpu_table(*args):
        built.append(memory_started.wait(30))  # True: the memory table began before the GPU table was done
        time.sleep(0.3)  # long enough for the other thread to reach the summary, were it not waiting
        return real_gpu(*args)

    def summarize(trace):
        summarized.append("gpu" in trace.__dict__)  # the GPU table was there when the summary began
        return real_summarize(trace)

    summarized, real_summarize = [], summary.summarize
    monkeypatch.setattr(memory, "memory_table", memory_table)
    monkeypatch.setattr(model, "gpu_table", gpu_table)
    monkeypatch.setattr(summary, "summarize", summarize)
    assert main(["summary", str(gpt), "--no-cache", "--format", "json"]) == 0
    assert built == [True] and summarized == [True]
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"]["devices"][0]["allocations"] == 996  # the [memory] events' allocations, as the view shows


def test_a_gpu_table_that_fails_is_raised_once_and_not_built_again(monkeypatch):
    from kerneltui.trace import model

    calls = []

    def gpu_table(*args):
        calls.append(threading.current_thread().name)
        raise RuntimeError("no GPU table")

    monkeypatch.setattr(model, "gpu_table", gpu_table)
    with pytest.raises(RuntimeError, match="no GPU table"):
        main(["summary", str(EAGER), "--no-cache", "--format", "json"])
    for thread in threading.enumerate():
        if thread.name == "kerneltui-summary":
            thread.join(10)  # its waiting calls end at once, none building the table again
            assert not thread.is_alive()
    assert calls == ["MainThread"]


def test_summary_forks_its_decode_workers_before_the_read_starts_its_thread(monkeypatch, capsys):
    from kerneltui.trace import cache

    def start_workers_for(paths, cache=None):
        reading = any(t.name == "kerneltui-load-ahead" for t in threading.enumerate())
        asked.append((paths, cache, reading))

    asked = []
    monkeypatch.setattr(cache, "start_workers_for", start_workers_for)
    assert main(["summary", str(EAGER), "--no-cache"]) == 0
    assert asked == [([str(EAGER)], False, False)]  # forked (were they wanted) before the read's thread started
