"""The data layer: trace files to tables. Imports neither textual nor torch."""

from kerneltui.trace.model import Trace, load_trace
from kerneltui.trace.schema import Kind, TraceMeta

__all__ = ["Kind", "Trace", "TraceMeta", "load_trace"]
