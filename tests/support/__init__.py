"""Helpers that build test inputs (synthetic traces, multi-rank jobs)."""
