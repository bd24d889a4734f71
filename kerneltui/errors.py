"""Errors a user can cause: printed as one line by the CLI, never as a traceback."""


class UserError(Exception):
    """A problem with the user's input (a file, an argument, a workload)."""

    exit_code = 2


class TraceError(UserError):
    """A trace file that cannot be read: missing, empty, not JSON, not a trace, corrupt."""
