"""A real terminal for end-to-end tests: the real `kerneltui` in tmux, keys in, capture-pane out."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import ROOT, cache_env


def kerneltui_command() -> str:
    """The installed console script when there is one, else the module (same code)."""
    script = shutil.which("kerneltui")
    return script if script else f"{shlex.quote(sys.executable)} -m kerneltui"


class Terminal:
    """A tmux session running one shell command; the shell prints EXIT=<status> when it ends. Each on a
    server of its own (``-L``): on the shared default server, one test's last session closing makes the
    server exit while the next test's new-session connects to it ("server exited unexpectedly")."""

    def __init__(self, command: str, width: int = 80, height: int = 24, env: str = ""):
        self.name = f"kerneltui-e2e-{uuid.uuid4().hex[:8]}"
        cache = f"XDG_CACHE_HOME={shlex.quote(cache_env()['XDG_CACHE_HOME'])}"  # the test's own cache, not ~/.cache
        # The pane's size must come from tmux: GNU readline (imported under pytest) exports COLUMNS=80
        # LINES=24 into the C environment, and an inherited pair would pin Textual to 80x24.
        shell = (f"unset COLUMNS LINES; cd {shlex.quote(str(ROOT))} && {cache} {env} PYTHONPATH={shlex.quote(str(ROOT))} {command};"
                 " echo EXIT=$?; sleep 60")
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), shell, check=True)

    def tmux(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        """A tmux command on this terminal's own server."""
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, check=check)

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout.splitlines()

    def wait_for(self, text: str, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.screen()
            if any(text in line for line in lines):
                return lines
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n" + "\n".join(self.screen()))

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys, check=True)

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def terminal():
    """terminal(command, width=80, height=24, env="") starts one; all are closed afterwards."""
    started: list[Terminal] = []

    def start(command: str, width: int = 80, height: int = 24, env: str = "") -> Terminal:
        t = Terminal(command, width, height, env)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()
