"""Old spellings kept for one release: each warns once per process, naming its replacement."""

from __future__ import annotations

import warnings

__all__ = ["CairnQDeprecationWarning", "forget_warnings", "renamed"]

_warned: set[str] = set()


class CairnQDeprecationWarning(DeprecationWarning):
    """An old spelling of a cairnq name or option, kept for one release.

    The message names what replaces it. Filter this class to silence or to
    raise on cairnq's deprecations only.
    """


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn, once per process for ``old``, that it is kept for one release and ``new`` replaces it.

    Args:
        old: The old spelling as a caller writes it (``"cq.add_schedule(...)"``).
        new: The spelling to use instead (``"cq.schedules.add(...)"``).
        stacklevel: Frames between the caller's line and this call, plus one
            (3: the caller called a function that calls ``renamed``).
    """
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        CairnQDeprecationWarning,
        stacklevel=stacklevel,
    )


def forget_warnings() -> None:
    """Warn again for every old spelling (for tests that check the warning)."""
    _warned.clear()
