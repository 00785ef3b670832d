"""How a command fails: one line on stderr and an exit code."""

from __future__ import annotations


class CommandError(Exception):
    """A command cannot do what was asked; ``main`` prints the message as one line."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def one_line(exc: BaseException) -> str:
    """An error's message as one line (drivers' messages span several)."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
