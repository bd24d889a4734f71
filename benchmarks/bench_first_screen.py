"""Time to the browser's first screen: `kerneltui open TRACE` in a real terminal (tmux), cold and warm.

For each trace, in a fresh tmux pane each time, measures seconds from starting the command to the
kernel table on screen (its header row), seen in what the pane writes (tmux pipe-pane into a file,
read every 5 ms: a poll of capture-pane every 20 ms spawned a process that took ~2 ms of CPU each time,
a sixth of a core beside a load that needs both, and put about 0.12 s on a cold 1 GB open):
  - cold:  the column cache off (KERNELTUI_CACHE=0), the trace decoded afresh;
  - first: the cache on and empty (cold; the app writes the entry in the background);
  - warm:  again, served from the cache.
Imports are included: this is what a user waits for. The cache lives in a temporary
XDG_CACHE_HOME, removed afterwards. Needs tmux. Traces default to the ones bench_load.py makes.

    python benchmarks/bench_first_screen.py [TRACE ...]
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kerneltui.trace.cache_dir import SCREEN_SUFFIX, SUFFIX, TEMP_PREFIX

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT = [HERE / "data" / "replicated_1000mb.json", HERE / "data" / "replicated_1000mb.json.gz"]
READY = "Count"  # the kernel table's header: the first screen is up
HELP = "escape closes"  # the help screen's title: the app answered a key
WAITING = "drawing the timeline"  # the timeline until the second stage (timeline, launch list, search) is in
ANALYSED = "busy "  # the header's GPU busy time: the third stage (the analyses: figures, health, o, H) is in


def written(directory: Path, suffix: str = SUFFIX) -> bool:
    """A whole entry is there (not only the temp file it is written into)."""
    return any(not p.name.startswith(TEMP_PREFIX) for p in directory.glob(f"*{suffix}"))


def pane(name: str) -> str:
    """What the tmux session ``name``, on its own server (``tmux -L name``), shows now."""
    return subprocess.run(["tmux", "-L", name, "capture-pane", "-p", "-t", name], capture_output=True, text=True,
                          check=False).stdout


class PaneStream:
    """What a tmux pane writes, as it writes it (``tmux pipe-pane`` appends it to a file): a text is
    on screen once the app has written it. Reading the file costs microseconds a poll."""

    KEPT = 64  # bytes kept from one read to the next, for a text split across them: longer than any looked for

    def __init__(self, file):
        self.file = file
        self.tail = b""

    def shows(self, text: str) -> bool:
        """Whether ``text`` was written since the last call: an occurrence that ends in what was read
        before was looked at then (found or not), not again."""
        wanted = text.encode()
        assert 0 < len(wanted) <= self.KEPT + 1
        chunk = self.file.read()
        if not chunk:
            return False
        seen = self.tail + chunk
        found = seen.find(wanted, max(0, len(self.tail) - len(wanted) + 1)) >= 0
        self.tail = seen[-self.KEPT :]
        return found


def first_screen(path: Path, env: dict[str, str], timeout: float = 120, entry_in: Path | None = None,
                 live: list[float] | None = None, everything: list[float] | None = None,
                 analysed: list[float] | None = None) -> float:
    """Seconds to the first screen; with ``entry_in``, the pane is kept until the app has written its
    cache entry and its kept first screen there (the next, warm run needs them). With ``live``, `?` is
    pressed as soon as the table is up, and the seconds to the help screen (the app answering keys:
    a kept first screen is up before the app is) are appended to it. With ``everything``, the seconds
    until the timeline is drawn (the second stage: timeline, launch list, search) are appended to it; with
    ``analysed``, the seconds until the header shows the GPU's busy time (the third stage, the analyses).

    Each run has a tmux server of its own (``-L``), killed at the end: the default server, shared,
    is left as it was."""
    name = f"kerneltui-bench-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", name]
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # the pane's shell waits for a line: its output is piped to the file before the command starts
    command = (f"unset COLUMNS LINES; read _; cd {shlex.quote(str(ROOT))} && {assignments} "
               f"{shlex.quote(sys.executable)} -m kerneltui open {shlex.quote(str(path))}; sleep 30")
    # what the pane writes, appended to a file and read as it comes
    with tempfile.NamedTemporaryFile(prefix="kerneltui-pane-") as written_out, open(written_out.name, "rb") as piped:
        stream = PaneStream(piped)
        try:
            subprocess.run([*tmux, "new-session", "-d", "-s", name, "-x", "120", "-y", "40", command], check=True)
            subprocess.run([*tmux, "pipe-pane", "-O", "-t", name, f"cat >> {shlex.quote(written_out.name)}"],
                           check=True)
            start = time.perf_counter()
            subprocess.run([*tmux, "send-keys", "-t", name, "Enter"], check=True)  # the command starts

            def seconds_until(done, what: str, poll: float = 0.02) -> float:
                while not done():
                    if time.perf_counter() - start > timeout:
                        raise SystemExit(f"{path.name}: no {what} within {timeout:.0f} s")
                    time.sleep(poll)
                return time.perf_counter() - start

            seconds = seconds_until(lambda: stream.shows(READY), "first screen", poll=0.005)
            if READY not in pane(name):  # (after the clock: the written text is the one on screen)
                raise SystemExit(f"{path.name}: {READY!r} written but not on screen:\n{pane(name)}")
            if live is not None:
                subprocess.run([*tmux, "send-keys", "-t", name, "?"], check=True)
                live.append(seconds_until(lambda: stream.shows(HELP), "answer to a key", poll=0.005))
            if everything is not None:
                everything.append(seconds_until(lambda: WAITING not in pane(name), "timeline"))
            if analysed is not None:
                analysed.append(seconds_until(lambda: ANALYSED in pane(name).split("\n", 1)[0], "analyses"))
            while entry_in is not None and not (written(entry_in) and written(entry_in, SCREEN_SUFFIX)):
                if time.perf_counter() - start > timeout:
                    break  # the entry is a later run's concern: this one's figure stands
                time.sleep(0.05)
            return seconds
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)


def main() -> None:
    if shutil.which("tmux") is None:
        raise SystemExit("bench_first_screen.py needs tmux")
    paths = [Path(p) for p in sys.argv[1:]] or DEFAULT
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"{missing[0]} not found: run benchmarks/bench_load.py first, or name a trace")
    cache_home = tempfile.mkdtemp(prefix="kerneltui-bench-cache-")
    print(f"{'file':<28} {'MB':>6} {'cold s':>7} {'first s':>8} {'warm s':>7}")
    try:
        for path in paths:
            cold = first_screen(path, {"KERNELTUI_CACHE": "0"})
            first = first_screen(path, {"KERNELTUI_CACHE": "1", "XDG_CACHE_HOME": cache_home},
                                 entry_in=Path(cache_home, "kerneltui"))
            warm = first_screen(path, {"KERNELTUI_CACHE": "1", "XDG_CACHE_HOME": cache_home})
            shutil.rmtree(Path(cache_home, "kerneltui"), ignore_errors=True)
            print(f"{path.name:<28} {path.stat().st_size / 1e6:>6.0f} {cold:>7.2f} {first:>8.2f} {warm:>7.2f}", flush=True)
    finally:
        shutil.rmtree(cache_home, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("COLUMNS", None)
    main()
