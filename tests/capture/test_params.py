"""Parameters from the command line: no torch needed."""

import pytest

from kerneltui.capture.params import describe, label, parse_assignments, parse_sweep, parse_value
from kerneltui.errors import UserError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e6", 1_000_000),
        ("1E8", 100_000_000),
        ("100", 100),
        ("1_000", 1000),
        ("-3", -3),
        ("2.0", 2),
        ("0.5", 0.5),
        ("1e-3", 0.001),
        ("true", True),
        ("False", False),
        ("cuda:0", "cuda:0"),
        ("bfloat16", "bfloat16"),
    ],
)
def test_values_become_numbers_where_they_are_numbers(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_assignments_keep_order_and_the_last_repeat():
    assert parse_assignments(["n=1e6", "dtype=bf16", "n=10"]) == {"n": 10, "dtype": "bf16"}
    assert list(parse_assignments(["b=1", "a=2"])) == ["b", "a"]
    assert parse_assignments(None) == {}


@pytest.mark.parametrize("bad", ["n", "=3", "n=", "2n=3", "n-x=1"])
def test_malformed_assignment_is_one_line(bad):
    with pytest.raises(UserError, match=r"write NAME=VALUE") as caught:
        parse_assignments([bad])
    assert "\n" not in str(caught.value)


def test_sweep_values():
    assert parse_sweep("n=100,1e6,1e8") == ("n", (100, 1_000_000, 100_000_000))
    assert parse_sweep(None) is None
    with pytest.raises(UserError, match="at least one value"):
        parse_sweep("n=,")


def test_file_label_and_description_leave_the_device_out():
    params = {"n": 1_000_000, "device": "cuda", "lr": 0.001, "dtype": "torch.bfloat16", "tag": "a/b c"}
    assert label(params) == "n1000000_lr0.001_dtypetorch.bfloat16_taga-b-c"
    assert describe(params) == "n=1000000 lr=0.001 dtype=torch.bfloat16 tag=a/b c"
