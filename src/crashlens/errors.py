"""Errors that explain themselves: each carries the one-line help the CLI prints."""

from __future__ import annotations


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
