"""The README as a user meets it: the set-up lines say what they do and how long, and the keys it
names for the diff screen are that screen's keys."""

from __future__ import annotations

import re

from kerneltui.tui.diff.screen import DiffScreen
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _setup_block() -> str:
    return README.split("## Set up and run", 1)[1].split("```sh", 1)[1].split("```", 1)[0]


def test_the_first_command_says_it_is_a_full_screen_and_how_to_leave_it():
    first = _setup_block().strip().splitlines()[0]
    assert first.startswith("#") and "full screen" in first and "q quits" in first


def test_the_test_command_says_how_long_it_takes():
    comment = _setup_block().strip().splitlines()[3]
    assert re.search(r"about \d+ minutes", comment), comment


def test_the_diff_keys_the_readme_names_are_the_screens():
    sentence = README.split("Keys: Enter opens a row", 1)[1].split("(`q` quits)", 1)[0]
    named = set()
    for chunk in re.findall(r"`([^`]+)`", sentence):
        named.update(k for k in re.split(r"[ /]", chunk) if k and not k.startswith("-"))
    bound = {"enter", "q"}
    for b in DiffScreen.BINDINGS:
        for key in b.key.split(","):
            bound.add({"plus": "+", "minus": "-", "comma": ",", "full_stop": ".", "question_mark": "?",
                       "slash": "/", "equals_sign": "="}.get(key.strip(), key.strip()))
    assert named and named <= bound, named - bound
    assert {"d", "t", "a", "m", "n", "N", "i", "H"} <= named
