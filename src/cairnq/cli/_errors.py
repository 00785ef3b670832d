"""How a command fails: one line on stderr and an exit code."""

from __future__ import annotations


class CommandError(Exception):
    """A command cannot do what was asked; ``main`` prints the message as one line."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# The library's advice names its keyword arguments; on the command line, the options.
_OPTION_WORDS = (
    ("pass schema=...", "pass --schema SCHEMA"),
    ("(cairnq migrate, or open with migrate=True)", "(`cairnq migrate`)"),
    ("pass replace=True", "pass --replace"),
    ("or use every=", "or use --every"),
)


def one_line(exc: BaseException) -> str:
    """An error's message as one line (drivers' messages span several), in the command's words."""
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    for library, command in _OPTION_WORDS:
        text = text.replace(library, command)
    return text


def a_or_an(noun: str) -> str:
    """``noun`` with its indefinite article: ``a module``, ``an int``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
