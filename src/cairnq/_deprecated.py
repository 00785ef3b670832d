"""Old spellings kept for one release: each warns once per process, naming its replacement."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["CairnQDeprecationWarning", "forget_warnings", "renamed"]

_warned: set[str] = set()


class CairnQDeprecationWarning(DeprecationWarning):
    """An old spelling of a cairnq name or option, kept for one release.

    The message names what replaces it. Filter this class to silence or to
    raise on cairnq's deprecations only.
    """


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def renamed(old: str, new: str) -> None:
    """Warn, once per process for ``old``, that it is kept for one release and ``new`` replaces it.

    The warning points at the first line outside cairnq on the stack (the
    application's call, however many of cairnq's own frames lie between), so
    Python's default filters show it and it names the line to change.

    Args:
        old: The old spelling as a caller writes it (``"cq.add_schedule(...)"``).
        new: The spelling to use instead (``"cq.schedules.add(...)"``).
    """
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        CairnQDeprecationWarning,
        stacklevel=_first_outside(),
    )


def _first_outside() -> int:
    """The ``stacklevel`` of the first frame outside the package, seen from ``warnings.warn``
    called in ``renamed``."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def forget_warnings() -> None:
    """Warn again for every old spelling (for tests that check the warning)."""
    _warned.clear()
