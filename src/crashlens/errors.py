"""Errors that explain themselves: each carries the one-line help the CLI prints."""

from __future__ import annotations

# The exit codes of every command (README.md, docs/ci.md): 0 analysed and a cause found;
# 1 analysed, nothing recognised; 2 usage or input error; 3 internal error (a bug); 4 with
# --fail-on, the top cause is one of the categories named; 130/141 interrupted (128 + SIGINT)
# or the reader of the output went away (128 + SIGPIPE), as a shell reports them.
EXIT_FOUND, EXIT_NOTHING, EXIT_USAGE, EXIT_INTERNAL, EXIT_FAIL_ON = 0, 1, 2, 3, 4
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141


class CrashlensError(Exception):
    """Base class; str(exc) is a one-line reason, .help says what to do about it."""

    exit_code = 2
    help = ""

    def __init__(self, message: str, help: str = "") -> None:
        super().__init__(message)
        if help:
            self.help = help


class RuleError(CrashlensError):
    help = "Run `crashlens rules validate` to see every problem of the rule base."


class InputError(CrashlensError):
    help = "Pass log files, dmesg output, core files, libraries, folders or archives."
