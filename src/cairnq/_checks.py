"""Argument checks and their bounds, shared by every layer that takes input.

Each check raises ``InvalidArgument`` with the reference SDK's wording, before
any statement runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .errors import InvalidArgument
from .models import HOLDER_SEPARATOR, STATUSES, TERMINAL_STATUSES

MAX_TEXT_BYTES = 1000
MAX_INT4 = 2**31 - 1
MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000
MAX_LIST_LIMIT = 10_000


def check_text(value: Any, what: str, *, optional: bool = False) -> str | None:
    """A name, queue, key or id: a non-empty string of bounded size with no NUL."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{what} must not be empty")
    if "\x00" in value:
        raise InvalidArgument(f"{what} must not contain a NUL character")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} contains a lone surrogate character") from None
    if size > MAX_TEXT_BYTES:
        raise InvalidArgument(f"{what} is {size} bytes, over the limit of {MAX_TEXT_BYTES}")
    return value


def check_worker_id(value: Any, *, optional: bool = False) -> str | None:
    """A worker id: ``check_text``'s, without ``HOLDER_SEPARATOR`` (a claim writes the
    worker id and its nonce joined by it, and readers split the column there)."""
    worker = check_text(value, "worker_id", optional=optional)
    if worker is not None and HOLDER_SEPARATOR in worker:
        raise InvalidArgument(
            f"worker_id must not contain {HOLDER_SEPARATOR!r} (cairnq joins a worker id "
            f"and its claim's nonce with it), not {worker!r}"
        )
    return worker


def check_int(value: Any, what: str, *, low: int, high: int = MAX_INT4) -> int:
    """An integer (not a bool) within ``[low, high]``.

    The message leads with the bound crossed (``batch must be >= 1``), the
    reference SDK's wording, then the other bound and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, not {type(value).__name__}")
    if value < low:
        raise InvalidArgument(f"{what} must be >= {low} (and <= {high}), got {value}")
    if value > high:
        raise InvalidArgument(f"{what} must be <= {high} (and >= {low}), got {value}")
    return value


def check_names(values: Iterable[str] | str, what: str) -> list[str]:
    """A non-string iterable of names (``("a", "b")``), each checked like a name."""
    if isinstance(values, str):
        raise InvalidArgument(f"{what} must be a list of strings, not a single string")
    return [check_text(v, f"{what} entry") or "" for v in values]


def check_status(value: Any, *, terminal: bool = False) -> str | None:
    if value is None:
        return None
    allowed = sorted(TERMINAL_STATUSES) if terminal else list(STATUSES)
    if value not in allowed:
        kind = "terminal: " if terminal else ""
        raise InvalidArgument(f"status must be {kind}one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def system_schema(name: str) -> bool:
    """Whether ``name`` is a PostgreSQL system schema's: ``information_schema`` or ``pg_*``.

    Compared without case: unquoted SQL folds ``PG_Catalog`` to ``pg_catalog``, so a
    quoted look-alike would confuse anyone reading the database by hand.
    """
    folded = name.lower()
    return folded == "information_schema" or folded.startswith("pg_")


SYSTEM_SCHEMA_REASON = (
    "information_schema and pg_* (pg_catalog, pg_toast, pg_temp, ...) belong to PostgreSQL "
    "itself, so cairnq's tables never go there; name a schema of your own"
)


SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
MAX_IDENTIFIER_BYTES = 63


def check_schema(schema: str | None) -> str | None:
    """Validate a PostgreSQL schema name: an identifier of at most 63 bytes (PostgreSQL
    truncates), not one of PostgreSQL's own (``information_schema``, ``pg_*``).

    Raises:
        InvalidArgument: ``schema`` is not such a name.
    """
    if schema is None:
        return None
    # fullmatch: with match, "$" would also accept a name ending in a newline.
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(
            f"schema {schema!r} is not a plain identifier: letters, digits, _ and $, "
            "not starting with a digit"
        )
    if len(schema.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise InvalidArgument(f"schema {schema!r} is longer than {MAX_IDENTIFIER_BYTES} bytes")
    if system_schema(schema):
        raise InvalidArgument(f"schema {schema!r} is refused: {SYSTEM_SCHEMA_REASON}")
    return schema


def check_repair(repair: Any, migrate: bool) -> bool:
    """A backend's ``repair`` option: a bool, and only with ``migrate``."""
    if not isinstance(repair, bool):
        raise InvalidArgument(f"repair must be True or False, not {type(repair).__name__}")
    if repair and not migrate:
        raise InvalidArgument("repair=True needs migrate=True: repairing applies migrations")
    return repair
