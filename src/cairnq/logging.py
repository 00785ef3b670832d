"""Log records as one JSON object per line: ``JsonFormatter``, for cairnq's loggers or any.

``cairnq worker --log-format json`` installs it on stderr; an application sets it
on a handler of its own.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

__all__ = ["JsonFormatter"]

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName"}


def _fallback(value: Any) -> Any:
    """What ``json`` cannot write itself: sets and tuples as lists, the rest as ``str``."""
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line.

    The object holds ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
    ``logger`` and ``message``, then every field the record was given with
    ``extra=`` (cairnq's worker gives ``task_id``, ``task_name``, ``queue``,
    ``attempt``, ``max_attempts``, ``duration_ms``, ``outcome``, ``worker_id``...),
    then ``exc_info`` (the formatted traceback, a string) and ``stack_info`` when
    the record has them. A value JSON cannot hold is written as its ``str``.

    Args:
        ensure_ascii: Escape non-ASCII characters (``False``: write them as UTF-8).

    Returns:
        ``format(record)`` returns the line, without a newline.

    Example::

        import logging
        from cairnq.logging import JsonFormatter

        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.getLogger("cairnq").addHandler(handler)
    """

    def __init__(self, *, ensure_ascii: bool = False) -> None:
        super().__init__()
        self.ensure_ascii = ensure_ascii

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.timezone.utc)
        document: dict[str, Any] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in document:
                document[key] = value
        if record.exc_info:
            document["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exc_info"] = record.exc_text
        if record.stack_info:
            document["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(document, default=_fallback, ensure_ascii=self.ensure_ascii)
