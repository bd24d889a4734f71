"""Errors a user can cause: printed as one line by the CLI, never as a traceback."""


class UserError(Exception):
    """A problem with the user's input (a file, an argument, a workload)."""

    exit_code = 2


class TraceError(UserError):
    """A trace file that cannot be read: missing, empty, not JSON, not a trace, corrupt."""


class NotATrace(TraceError):
    """A file that is readable but is no trace at all (JSON without traceEvents, or not JSON): in a directory of
    rank traces, a notes.json or a README beside them, skipped rather than counted as a rank that failed.
    ``json``: the file is a JSON document (not merely bytes a damaged trace could have become)."""

    def __init__(self, message: str, json: bool = False):
        super().__init__(message)
        self.json = json
