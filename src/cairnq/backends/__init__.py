"""Database backends behind one seam (see ``base``), chosen by URL."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import InvalidArgument
from .base import Backend
from .sqlite import SQLiteBackend

__all__ = ["Backend", "SQLiteBackend", "open_backend", "sqlite_path_from_url"]


def sqlite_path_from_url(url: str) -> str:
    """``sqlite:///relative.db`` -> ``relative.db``; ``sqlite:////abs/x.db`` -> ``/abs/x.db``."""
    rest = url[len("sqlite://") :]
    if not rest.startswith("/"):
        raise InvalidArgument(
            f"malformed SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db"
        )
    path = unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise InvalidArgument(f"SQLite URL {url!r} names no file")
    return path


def open_backend(url: str | os.PathLike[str], **options: Any) -> Backend:
    """Make a backend from a URL: ``sqlite:///path.db``, ``postgresql://...``, or a file path.

    Args:
        url: The database. A string without a scheme is a SQLite file path.
        **options: Passed to the backend's constructor (e.g. ``busy_timeout_ms``).

    Raises:
        InvalidArgument: the URL's scheme is not one cairnq knows.
    """
    text = os.fspath(url)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme == "sqlite":
        return SQLiteBackend(sqlite_path_from_url(text), **options)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresBackend

        return PostgresBackend(text, **options)
    if scheme:
        raise InvalidArgument(
            f"unsupported database URL scheme {scheme!r}: use sqlite:///path.db or postgresql://..."
        )
    return SQLiteBackend(text, **options)
