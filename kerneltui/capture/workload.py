"""The workload contract: a Python file defining `workload(**params)` that returns `(fn, inputs)`.

    def workload(n: int = 1_000_000, device: str = "cuda"):
        a, b = torch.randn(n, device=device), torch.randn(n, device=device)
        return add_relu, (a, b)

Every parameter is a `-p NAME=VALUE` option; `device` is filled in with "cuda" or "cpu", and
`compile` and `mode`, where declared, by kerneltui (the mode's compile function, "eager"/"compiled").
Eager mode calls `fn(*inputs)`, compiled mode `torch.compile(fn)(*inputs)`; `(model, batch_dict)`
is called `model(**batch)`. See docs/capture.md.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltui.capture.params import Value
from kerneltui.errors import UserError

HOW_TO = (
    'add `def workload(n: int = 1_000_000, device: str = "cuda"):` that builds the inputs '
    "and ends with `return fn, (inputs...)` (see docs/capture.md)"
)
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
# Parameters kerneltui fills in for each mode, never from -p: not stored, not in file names.
GIVEN_BY_KERNELTUI = ("compile", "mode")
DICT_HINT = "for keyword inputs `return model, batch` (capture calls model(**batch)) or `return lambda: model(**batch)`"


class UserCodeError(Exception):
    """The user's code raised; `where` says when: "in workload()", "in profiled eager call 2"..."""

    def __init__(self, where: str, error: Exception):
        super().__init__(f"{where}: {type(error).__name__}: {error}")
        self.where = where
        self.error = error


class ScriptExit(Exception):
    """The user's code raised SystemExit (sys.exit(), or its own argparse refusing the arguments)."""

    def __init__(self, where: str, code: object):
        super().__init__(f"{where}: SystemExit({code!r})")
        self.where = where
        self.code = code

    def status(self) -> str:
        """What the script exited with, as the shell would see it."""
        if self.code is None:
            return "status 0"
        if isinstance(self.code, int):
            return f"status {self.code}"
        return f"{str(self.code)!r} (status 1)"  # sys.exit("message"): Python prints it and exits 1


@contextmanager
def user_code(where: str) -> Iterator[None]:
    """Marks a call into the user's code, so that what it raises is shown as theirs, not ours.

    SystemExit too: left alone it would end kerneltui with the script's status and no word of why.
    """
    try:
        yield
    except SystemExit as exc:
        raise ScriptExit(where, exc.code) from None
    except Exception as exc:
        raise UserCodeError(where, exc) from exc


@contextmanager
def script_argv(path: str, args: tuple[str, ...]) -> Iterator[None]:
    """The script's own sys.argv while it is imported, built and run: [its path, *the args after --].

    A script that parses its command line at import then sees its arguments, not kerneltui's, and
    argparse names it, not kerneltui, in its messages. Restored afterwards.
    """
    saved = sys.argv
    sys.argv = [path, *args]
    try:
        yield
    finally:
        sys.argv = saved


@dataclass(frozen=True)
class WorkloadFile:
    path: Path
    name: str  # the file's stem: names the traces
    factory: Callable[..., Any]
    parameters: tuple[str, ...]  # in signature order
    defaults: dict[str, Any]
    takes_any: bool  # workload(**kwargs)
    given: tuple[str, ...] = ()  # which of GIVEN_BY_KERNELTUI it declares


@dataclass(frozen=True)
class Built:
    """What one mode runs: `fn(*args, **kwargs)` per call."""

    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)


def load(path: str) -> WorkloadFile:
    """Imports the file as a module (its `if __name__ == "__main__"` block does not run)."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"no such workload file: {path}")
    module_name = "kerneltui_workload_" + re.sub(r"\W", "_", file.stem)
    loader = importlib.machinery.SourceFileLoader(module_name, str(file))
    spec = importlib.util.spec_from_loader(module_name, loader)
    module = importlib.util.module_from_spec(spec)
    # Registered and importable like a script's own module: torch.compile looks functions'
    # modules up by name, and the file may import its neighbours.
    sys.modules[module_name] = module
    if str(file.resolve().parent) not in sys.path:
        sys.path.insert(0, str(file.resolve().parent))
    with user_code(f"while loading {path}"):
        loader.exec_module(module)
    factory = getattr(module, "workload", None)
    if factory is None:
        raise UserError(f"{path} defines no workload(): {HOW_TO}")
    if not inspect.isfunction(factory):
        raise UserError(f"{path}: workload is a {type(factory).__name__}, not a function: {HOW_TO}")
    signature = inspect.signature(factory)
    named = [p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind == p.POSITIONAL_ONLY for p in named):
        raise UserError(f"{path}: workload() takes positional-only parameters; kerneltui passes them by name")
    return WorkloadFile(
        path=file,
        name=file.stem,
        factory=factory,
        parameters=tuple(p.name for p in named if p.name not in GIVEN_BY_KERNELTUI),
        defaults={p.name: p.default for p in named if p.default is not p.empty},
        takes_any=any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()),
        given=tuple(p.name for p in named if p.name in GIVEN_BY_KERNELTUI),
    )


def resolve(workload: WorkloadFile, given: dict[str, Value], device: str) -> dict[str, Any]:
    """The full keyword arguments of one workload() call: defaults, then -p values, then the device."""
    known = workload.parameters
    reserved = [name for name in given if name in GIVEN_BY_KERNELTUI]
    if reserved:
        raise UserError(f"-p {reserved[0]}=...: kerneltui passes `{reserved[0]}` to workload() itself, per mode")
    unknown = [name for name in given if name not in known]
    if unknown and not workload.takes_any:
        listed = ", ".join(known) or "none"
        raise UserError(f"{workload.path}: workload() has no parameter {unknown[0]!r} (its parameters: {listed})")
    params = {name: workload.defaults[name] for name in known if name in workload.defaults}
    if "device" in known and "device" not in given:
        params["device"] = device
    for name, value in given.items():
        default = workload.defaults.get(name)
        # `-p lr=1` for `lr: float = 1e-3`: the workload expects a float.
        params[name] = float(value) if isinstance(default, float) and type(value) is int else value
    missing = [name for name in known if name not in params]
    if missing:
        raise UserError(
            f"{workload.path}: workload() parameter {missing[0]!r} has no default: "
            f"pass -p {missing[0]}=VALUE or give it a default"
        )
    return {name: params[name] for name in (*known, *unknown)}


def build(workload: WorkloadFile, params: dict[str, Any], given: dict[str, Any] | None = None) -> Built:
    """Calls workload(**params), plus what kerneltui gives (`compile`, `mode`) where it declares them:
    the call to run, checked against the contract."""
    extra = {name: value for name, value in (given or {}).items() if name in workload.given}
    with user_code("in workload()"):
        built = workload.factory(**params, **extra)
    if isinstance(built, Mapping):
        raise UserError(f"{workload.path}: workload() returned a {type(built).__name__}; {DICT_HINT}")
    if callable(built):
        return Built(built)
    if isinstance(built, (tuple, list)) and len(built) == 2 and callable(built[0]):
        fn, inputs = built
        if isinstance(inputs, Mapping):
            bad = next((k for k in inputs if not isinstance(k, str)), None)
            if bad is not None:
                raise UserError(f"{workload.path}: workload() returned a batch with the key {bad!r}; "
                                "model(**batch) needs string keys")
            return Built(fn, (), dict(inputs))
        if isinstance(inputs, (tuple, list)):
            return Built(fn, tuple(inputs))
        raise UserError(
            f"{workload.path}: workload() returned inputs of type {type(inputs).__name__}; "
            "make them a tuple: `return fn, (x,)`"
        )
    if isinstance(built, (tuple, list)):
        at = next((i for i, item in enumerate(built) if isinstance(item, Mapping)), None)
        if at is not None:
            raise UserError(f"{workload.path}: workload() returned a dict as item {at + 1} of {len(built)}; "
                            f"{DICT_HINT}")
    raise UserError(
        f"{workload.path}: workload() returned {type(built).__name__}; it must return `fn, (inputs...)`, "
        "e.g. `return add_relu, (a, b)`, or a function that takes no inputs"
    )


def user_traceback(error: BaseException) -> str:
    """The traceback as `python model.py` would print it: starting at the user's own frames."""
    torch = sys.modules.get("torch")
    ours = tuple(
        [_PACKAGE_DIR + os.sep, "<frozen "] + ([str(Path(torch.__file__).parent) + os.sep] if torch else [])
    )
    report = traceback.TracebackException.from_exception(error)
    frames = list(report.stack)
    first = next((i for i, frame in enumerate(frames) if not frame.filename.startswith(ours)), len(frames))
    # With no frame of theirs (a torch.compile failure), torch's frames are the only clue: keep them.
    if first < len(frames) or isinstance(error, SyntaxError):
        report.stack = traceback.StackSummary.from_list(frames[first:])
    return "".join(report.format())
