"""Backends by URL scheme: each backend registers the schemes it opens.

And what every backend runs when it opens a database (``Opening``): the layer
above the backends (the kernel) registers it once, so a backend runs the steps
of opening without naming them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from .._clock import Clock
from ..errors import InvalidArgument
from ..protocol.statements import Dialect
from ..protocol.steps import Op, Setup
from .base import Backend

Opener = Callable[..., Backend]
ToolOptions = Callable[[str], dict[str, Any]]
Scratch = Callable[[str, "Clock | None"], AbstractContextManager[Backend]]


def _no_tool_options(tool: str) -> dict[str, Any]:
    return {}


def _as_given(url: str) -> str:
    return url


@dataclass(frozen=True)
class Registration:
    """How to open one kind of database.

    ``opener(url, **options)`` makes a backend (not yet opened); ``has_schemas``
    says whether it takes a ``schema=`` option; ``tool_options(tool)`` gives the
    options for a short-lived tool such as ``"cli"`` or ``"dashboard"`` (a small
    pool, no LISTEN connection, the tool's name in the database's activity list);
    ``location(url)`` the shortest text that opens the same database (a path);
    ``scratch(url, clock)`` a context manager giving a backend on a fresh, empty
    database of that kind, thrown away afterwards (conformance runs, tests).
    """

    dialect: Dialect
    opener: Opener
    has_schemas: bool = False
    tool_options: ToolOptions = _no_tool_options
    location: Callable[[str], str] = _as_given
    scratch: Scratch | None = None


_REGISTRY: dict[str, Registration] = {}
_LOCK = threading.Lock()


def register_backend(
    schemes: Iterable[str],
    opener: Opener,
    *,
    dialect: Dialect,
    has_schemas: bool = False,
    tool_options: ToolOptions | None = None,
    location: Callable[[str], str] | None = None,
    scratch: Scratch | None = None,
) -> None:
    """Make ``open_backend`` (and every URL-taking API) open ``schemes`` with ``opener``.

    Args:
        schemes: URL schemes, lower case (``"sqlite"``); ``""`` is a URL without
            a scheme, i.e. a file path.
        opener: ``opener(url, **options) -> Backend``, called with the whole URL
            and the caller's backend options; it should not connect yet (``open``
            does). Import an optional driver inside it, so that registering costs
            nothing when the driver is not installed.
        dialect: The backend's ``dialect``.
        has_schemas: Whether the backend takes a ``schema=`` option.
        tool_options: ``tool_options(tool)`` -> extra options for a short-lived
            tool (``"cli"``, ``"dashboard"``); none by default.
        location: ``location(url)`` -> the shortest text ``opener`` takes for the
            same database (a SQLite URL's path); the URL itself by default.
        scratch: ``scratch(url, clock)`` -> a context manager giving a backend on
            a fresh, empty database beside ``url``'s, removed on exit; what
            ``cairnq conformance`` runs each scenario on. None: not supported.

    Raises:
        InvalidArgument: a scheme is not lower case, or ``opener`` is not callable.

    Example::

        register_backend(["mydb"], lambda url, **options: MyBackend(url, **options),
                         dialect="mydb")
    """
    if not callable(opener):
        raise InvalidArgument(f"a backend opener must be callable, got {opener!r}")
    names = list(schemes)
    for scheme in names:
        if not isinstance(scheme, str) or scheme != scheme.lower() or "://" in scheme:
            raise InvalidArgument(f"a URL scheme must be a lower-case name, got {scheme!r}")
    entry = Registration(
        dialect,
        opener,
        has_schemas,
        tool_options or _no_tool_options,
        location or _as_given,
        scratch,
    )
    with _LOCK:
        for scheme in names:
            _REGISTRY[scheme] = entry


def url_scheme(url: str) -> str:
    """The lower-case scheme of ``url``; ``""`` for a plain file path."""
    if "://" not in url:
        return ""
    from urllib.parse import urlsplit

    return urlsplit(url).scheme.lower()


def registration(scheme: str) -> Registration | None:
    """The backend registered for ``scheme``, if any."""
    with _LOCK:
        return _REGISTRY.get(scheme)


def open_backend(url: str | os.PathLike[str], **options: Any) -> Backend:
    """Make a backend from a URL: ``sqlite:///path.db``, ``postgresql://...``, or a file path.

    The backend is not connected yet: its ``open`` (or the first call) connects.

    Args:
        url: The database. A string without a scheme is a SQLite file path.
        **options: Passed to the backend's constructor (e.g. ``busy_timeout_ms``).

    Raises:
        InvalidArgument: the URL's scheme is not one cairnq knows.
    """
    text = os.fspath(url)
    entry = registration(url_scheme(text))
    if entry is None:
        raise InvalidArgument(
            f"unsupported database URL scheme {url_scheme(text)!r}: "
            "use sqlite:///path.db or postgresql://..."
        )
    return entry.opener(text, **options)


class SetupSteps(Protocol):
    """``setup(dialect, migrate=..., repair=..., installation_check=...)``: the steps of
    opening a database, ``installation_check`` (an operation) first when given."""

    def __call__(
        self,
        dialect: Dialect,
        *,
        migrate: bool,
        repair: bool = False,
        installation_check: Op[Any] | None = None,
    ) -> Setup: ...


@dataclass(frozen=True)
class Opening:
    """What a backend runs on the database it opens, handed in from above.

    ``setup`` gives the steps of opening (the installation check, the ledger, the
    pending migrations, the protocol version); a backend drives them with
    ``protocol.steps.run_setup`` or ``arun_setup``. ``installation_check(schema)``
    is the operation that refuses a PostgreSQL connection seeing another
    installation than ``schema`` (``SchemaMismatch``); a backend runs it on an
    application's connection before using it.
    """

    setup: SetupSteps
    installation_check: Callable[[str | None], Op[None]]


_OPENING: Opening | None = None


def register_opening(opening: Opening) -> None:
    """Make every backend open databases with ``opening`` (the kernel registers its own)."""
    global _OPENING
    _OPENING = opening


def opening() -> Opening:
    """What backends run when they open a database.

    Raises:
        RuntimeError: nothing registered one (``import cairnq`` does).
    """
    if _OPENING is None:
        raise RuntimeError("no Opening is registered: import cairnq, which registers its own")
    return _OPENING
