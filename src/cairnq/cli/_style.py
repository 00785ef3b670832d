"""Colour and emphasis for what the command line writes, where a terminal shows them.

A stream gets ANSI styles only when it is a terminal, ``NO_COLOR`` is unset or
empty (https://no-color.org), and ``TERM`` is not ``dumb``. Piped or redirected
output, and so every script reading it, gets the same text without them.
"""

from __future__ import annotations

import logging
import os
from typing import TextIO

RESET = "\x1b[0m"
STYLES = {
    "error": "1;31",  # bold red: the one line a failed command prints
    "warning": "33",  # yellow
    "bold": "1",
}
LEVELS = {logging.WARNING: "warning", logging.ERROR: "error", logging.CRITICAL: "error"}


def wants_colour(stream: TextIO) -> bool:
    """Whether ``stream`` shows styles: a terminal, with ``NO_COLOR`` unset or empty."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def paint(text: str, style: str, stream: TextIO) -> str:
    """``text`` in ``style`` (a name of ``STYLES``) when ``stream`` shows styles, else as is."""
    if not wants_colour(stream):
        return text
    return f"\x1b[{STYLES[style]}m{text}{RESET}"


class LevelColours(logging.Formatter):
    """A text formatter that colours a WARNING's level name yellow and an ERROR's red,
    when the stream its handler writes to shows styles; the rest of the line is
    unchanged."""

    def __init__(self, fmt: str, stream: TextIO) -> None:
        super().__init__(fmt)
        self.stream = stream

    def format(self, record: logging.LogRecord) -> str:
        style = LEVELS.get(record.levelno)
        if style is None or not wants_colour(self.stream):
            return super().format(record)
        plain = record.levelname
        record.levelname = paint(plain, style, self.stream)
        try:
            return super().format(record)
        finally:
            record.levelname = plain
