"""Trace -> tables, the analyses: pure functions of loaded traces, no textual, no torch."""
