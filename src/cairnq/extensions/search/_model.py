"""What the search extension checks and builds in Python: tags, declared search fields,
the terms a submit stores, and a search's filters.

A term is a ``(field, value)`` pair stored per task in ``cairnq_search_terms``: a tag is
the field ``"#"``; a declared field is its name (an identifier) and the value found at
its path in the task's metadata or payload, as text.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._checks import check_int, check_text
from ...durations import duration_ms, point_ms
from ...errors import InvalidArgument
from ...kernel import NewTask

TAG = "#"
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_FIELDS = 32
MAX_VALUE_CHARS = 256
MAX_LIMIT = 1000
# A tag: printable, no whitespace, comma or quote (the search box splits on them).
_TAG = re.compile(r"[^\s,\"'\x00]{1,64}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_SEGMENT = re.compile(r"[^.\s]{1,128}")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Bounds of the task ids a search walks when it has no time range: every
# ``task_`` + ULID sorts between them, in any collation.
LOWEST_ID = ""
HIGHEST_ID = "task_" + "Z" * 27
# How far a task id's time (its submitter's clock) may be from its created_at_ms (the
# database's clock, or the submitter's) for a time range to find it.
CLOCK_SLACK_MS = 3_600_000


def check_tags(tags: Any) -> tuple[str, ...]:
    """``submit``'s ``tags``: a list (or tuple, set) of tags, each 1 to 64 characters
    without whitespace, commas or quotes; at most 32, duplicates dropped, order kept.

    Raises:
        InvalidArgument: a string or another non-collection, a tag of the wrong type or
            shape, or too many.
    """
    if isinstance(tags, (str, bytes, Mapping)) or not isinstance(tags, Iterable):
        raise InvalidArgument(
            f"tags must be a list of strings (tags=['billing']), got {type(tags).__name__}"
        )
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidArgument(f"each tag must be a string, got {tag!r}")
        if _TAG.fullmatch(tag) is None:
            raise InvalidArgument(
                f"a tag is 1 to {MAX_TAG_CHARS} characters without whitespace, commas, "
                f"quotes or NUL; got {tag!r}"
            )
        seen[tag] = None
    if len(seen) > MAX_TAGS:
        raise InvalidArgument(f"at most {MAX_TAGS} tags per task, got {len(seen)}")
    return tuple(seen)


@dataclass(frozen=True)
class Field:
    """One declared search field: its ``name`` and where its value is read
    (``source``: ``"metadata"`` or ``"payload"``; ``path``: the keys down to it)."""

    name: str
    source: str
    path: tuple[str, ...]

    def value_in(self, spec: NewTask) -> str | None:
        """The field's value in ``spec`` as stored (``index_value``), or ``None``."""
        found: Any = spec.metadata_value if self.source == "metadata" else spec.payload_value
        if found is None:
            text = spec.metadata if self.source == "metadata" else spec.payload
            found = json.loads(text)
        for key in self.path:
            if not isinstance(found, dict) or key not in found:
                return None
            found = found[key]
        return index_value(found)


def check_fields(fields: Any) -> tuple[Field, ...]:
    """``Search(fields=...)``: a mapping of field names (identifiers) to paths
    (``"metadata.customer"``, ``"payload.order.id"``).

    Raises:
        InvalidArgument: not a mapping, a bad name or path, or too many.
    """
    if fields is None:
        return ()
    if not isinstance(fields, Mapping):
        raise InvalidArgument(
            "fields must be a dict of names to paths "
            f"({{'customer': 'metadata.customer'}}), got {type(fields).__name__}"
        )
    if len(fields) > MAX_FIELDS:
        raise InvalidArgument(f"at most {MAX_FIELDS} search fields, got {len(fields)}")
    out = []
    for name, path in fields.items():
        out.append(Field(check_field_name(name), *_check_path(name, path)))
    return tuple(out)


def check_field_name(name: Any) -> str:
    """A search field's name: an identifier of at most 64 characters.

    Raises:
        InvalidArgument: anything else.
    """
    if not isinstance(name, str) or _FIELD.fullmatch(name) is None:
        raise InvalidArgument(
            f"a search field's name is an identifier (letters, digits, _), got {name!r}"
        )
    return name


def _check_path(name: str, path: Any) -> tuple[str, tuple[str, ...]]:
    if not isinstance(path, str):
        raise InvalidArgument(
            f"search field {name!r}: its path must be a string such as 'metadata.customer', "
            f"got {path!r}"
        )
    source, _, rest = path.partition(".")
    segments = tuple(rest.split(".")) if rest else ()
    if (
        source not in ("metadata", "payload")
        or not segments
        or not all(_SEGMENT.fullmatch(s) for s in segments)
    ):
        raise InvalidArgument(
            f"search field {name!r}: its path starts with 'metadata.' or 'payload.' and "
            f"names the keys down to the value ('metadata.customer'), got {path!r}"
        )
    return source, segments


def index_value(value: Any) -> str | None:
    """A JSON scalar as a term's text: a string as it is, a number or boolean as its
    JSON (``42``, ``true``); ``None`` for anything else or text over 256 characters."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value == value and value not in (float("inf"), -float("inf")):
        return json.dumps(value)
    return None


def terms_for(
    specs: Sequence[NewTask], tags: Sequence[str], fields: Sequence[Field]
) -> list[list[str]]:
    """The ``[task_id, field, value]`` rows of ``specs``: each task's ``tags``, and the
    value of each declared field its metadata or payload holds."""
    rows: list[list[str]] = []
    for spec in specs:
        rows.extend([spec.id, TAG, tag] for tag in tags)
        for field in fields:
            value = field.value_in(spec)
            if value is not None:
                rows.append([spec.id, field.name, value])
    return rows


@dataclass(frozen=True)
class Query:
    """A search's filters, checked (``check_query``)."""

    terms: tuple[tuple[str, str], ...]
    low_id: str
    high_id: str
    from_ms: int | None
    until_ms: int | None
    status: str | None
    queue: str | None
    name: str | None
    error: str | None
    limit: int

    def params(self) -> dict[str, Any]:
        """The parameters of ``search_tasks`` (and, with a term's, of ``search_by_term``)."""
        return {
            "low_id": self.low_id,
            "high_id": self.high_id,
            "from_ms": self.from_ms,
            "until_ms": self.until_ms,
            "status": self.status,
            "queue": self.queue,
            "name": self.name,
            "error": self.error,
            "limit": self.limit,
        }

    @property
    def words(self) -> str | None:
        """The error text as the full-text index reads it: its words, lowered, space
        separated, a prefix one ending in ``*`` (``error_words``)."""
        return None if self.error is None else error_words(self.error)


_WORD = re.compile(r"([^\W_]+)(\*?)")


def error_words(text: str) -> str:
    """``text``'s words for the full-text index: each run of letters and digits,
    lowered, ``*`` kept right after one (a prefix); ``""`` when it has none.

    ``"Card-declined: 42*"`` gives ``"card declined 42*"``: SQLite's error search
    splits it at the spaces (the words hold no ``"`` or ``\\``, so it is a JSON array
    once quoted), PostgreSQL's makes it a tsquery with ``&`` and ``:*``.
    """
    return " ".join(word.lower() + star for word, star in _WORD.findall(text))


STATUSES = ("queued", "running", "succeeded", "failed", "canceled")


def check_query(
    *,
    tags: Any,
    where: Any,
    error: Any,
    since: Any,
    until: Any,
    status: Any,
    queue: Any,
    name: Any,
    before: Any,
    limit: Any,
    now_ms: int,
) -> Query:
    """A search's filters, checked.

    Raises:
        InvalidArgument: a filter of the wrong type or value.
    """
    # A declared field's value first: the search walks the first term's tasks, and a
    # value is most often held by fewer tasks than a tag.
    terms: list[tuple[str, str]] = []
    if where is not None:
        if not isinstance(where, Mapping):
            raise InvalidArgument(
                f"where must be a dict of search fields to values ({{'customer': 'acme'}}), "
                f"got {type(where).__name__}"
            )
        for field, value in where.items():
            text = index_value(value)
            if text is None or "\x00" in text:
                raise InvalidArgument(
                    f"where={{{field!r}: ...}}: a value is a string, a number or a boolean "
                    f"of at most {MAX_VALUE_CHARS} characters without NUL, got {value!r}"
                )
            terms.append((check_field_name(field), text))
    if tags is not None:
        if isinstance(tags, str):
            tags = [tags]
        terms.extend((TAG, tag) for tag in check_tags(tags))
    error_text = None
    if error is not None:
        if not isinstance(error, str) or not error.strip() or "\x00" in error:
            raise InvalidArgument(
                f"error must be a non-empty string without NUL characters, got {error!r}"
            )
        error_text = error.strip()
        if not error_words(error_text):
            raise InvalidArgument(f"error must hold a word (letters or digits), got {error!r}")
    from_ms = _moment(since, "since", now_ms)
    until_ms = _moment(until, "until", now_ms)
    if from_ms is not None and until_ms is not None and from_ms >= until_ms:
        raise InvalidArgument("since must come before until")
    if status is not None and status not in STATUSES:
        raise InvalidArgument(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    low_id = LOWEST_ID if from_ms is None else id_floor(from_ms - CLOCK_SLACK_MS)
    high_id = HIGHEST_ID if until_ms is None else id_floor(until_ms + CLOCK_SLACK_MS)
    if before is not None:
        cursor = check_text(before, "before") or ""
        high_id = min(high_id, cursor)
    return Query(
        terms=tuple(terms),
        low_id=low_id,
        high_id=high_id,
        from_ms=from_ms,
        until_ms=until_ms,
        status=status,
        queue=check_text(queue, "queue", optional=True),
        name=check_text(name, "name", optional=True),
        error=error_text,
        limit=check_int(limit, "limit", low=1, high=MAX_LIMIT),
    )


def _moment(value: Any, what: str, now_ms: int) -> int | None:
    """``since``/``until``: an aware ``datetime``, or a duration meaning that long ago."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return point_ms(value, what)
    return now_ms - duration_ms(value, what, low_ms=0)


def id_floor(ms: int) -> str:
    """The lowest ``task_`` + ULID id whose time is ``ms`` (epoch milliseconds)."""
    stamp = max(0, min(ms, (1 << 48) - 1))
    head = "".join(_CROCKFORD[(stamp >> shift) & 31] for shift in range(45, -5, -5))
    return "task_" + head + "0" * 16


SYNTAX = (
    'tag:billing  customer=acme  error:"card declined"  status:failed  queue:emails  '
    "name:email.send  since:1d  until:2h"
)
_WORDS = ("tag", "error", "status", "queue", "name", "since", "until")


def parse(text: str) -> dict[str, Any]:
    """A search box's text as ``find``'s keywords (``SYNTAX``): ``tag:X`` (or ``#X``,
    repeatable: all), ``FIELD=VALUE`` (repeatable: all), ``error:TEXT``, ``status:``,
    ``queue:``, ``name:``, ``since:`` and ``until:`` (a duration ago); words alone are
    error text. Quotes keep spaces in a value.

    Raises:
        InvalidArgument: unbalanced quotes, a word given twice, or an empty value.
    """
    import shlex

    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise InvalidArgument(f"the search {text!r} has an unbalanced quote") from exc
    found: dict[str, Any] = {}
    tags: list[str] = []
    where: dict[str, str] = {}
    loose: list[str] = []
    for token in tokens:
        word, colon, value = token.partition(":")
        field, equals, wanted = token.partition("=")
        if token.startswith("#") and len(token) > 1:
            tags.append(token[1:])
        elif colon and word in _WORDS and "=" not in word:
            if not value:
                raise InvalidArgument(f"{word}: needs a value ({SYNTAX})")
            if word == "tag":
                tags.append(value)
            elif word in found:
                raise InvalidArgument(f"{word}: is given twice")
            else:
                found[word] = value
        elif equals and _FIELD.fullmatch(field):
            where[field] = wanted
        else:
            loose.append(token)
    if loose:
        if "error" in found:
            raise InvalidArgument(
                f"words alone are error text, and error: is given too: {' '.join(loose)!r}"
            )
        found["error"] = " ".join(loose)
    if tags:
        found["tags"] = tags
    if where:
        found["where"] = where
    return found


def query_of(text: Any, *, before: Any, limit: Any, now_ms: int) -> Query:
    """The search box's ``text`` (``parse``) as a checked ``Query``.

    Raises:
        InvalidArgument: text that is no string, does not parse, or a bad filter.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"a search is a string ({SYNTAX}), got {type(text).__name__}")
    given: dict[str, Any] = dict.fromkeys(
        ("tags", "where", "error", "since", "until", "status", "queue", "name")
    )
    given.update(parse(text))
    return check_query(**given, before=before, limit=limit, now_ms=now_ms)
