"""A ``TASKS`` entry naming ``CairnQBackend``, checked whole when the project starts."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..._checks import check_int, check_names, check_schema
from ...errors import InvalidArgument

ENTRY_KEYS = ("BACKEND", "QUEUES", "OPTIONS")
OPTION_KEYS = ("DATABASE", "SCHEMA", "MAX_ATTEMPTS", "TASK_MODULES")


@dataclass(frozen=True)
class Settings:
    """What a ``TASKS`` entry asks of a ``CairnQBackend``, checked."""

    database: str = "default"
    schema: str | None = None
    max_attempts: int | None = None
    task_modules: list[str] = field(default_factory=list)


def _unknown(keys: Iterable[str], known: tuple[str, ...]) -> str | None:
    """``['QUEUE'] (did you mean 'QUEUES'?)`` for the keys not ``known``, or ``None``."""
    unknown = sorted(str(k) for k in keys if k not in known)
    if not unknown:
        return None
    meant = {
        key: close[0]
        for key in unknown
        if (close := difflib.get_close_matches(key.upper(), known, n=1, cutoff=0.6))
    }
    if not meant:
        return str(unknown)
    if len(unknown) == 1:
        return f"{unknown} (did you mean {meant[unknown[0]]!r}?)"
    pairs = ", ".join(f"{right!r} for {key!r}" for key, right in meant.items())
    return f"{unknown} (did you mean {pairs}?)"


def _listing(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1]


def check_entry(alias: str, params: Mapping[str, Any]) -> Settings:
    """The checked settings of ``TASKS[alias]``.

    Raises:
        ImproperlyConfigured: a key of the entry or of its ``OPTIONS`` is unknown
            (the message names the key meant, when one is close), or a value has
            the wrong type or is out of range; the message names the setting and
            what it takes.
    """
    where = f"TASKS[{alias!r}]"
    unknown = _unknown(params, ENTRY_KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"{where} has unknown keys {unknown}; a CairnQBackend entry takes "
            f"{_listing(ENTRY_KEYS)}"
        )
    queues = params.get("QUEUES")
    if queues is not None:
        try:
            names = check_names(queues, "queues")
        except (InvalidArgument, TypeError) as exc:
            raise ImproperlyConfigured(
                f"{where}['QUEUES'] must be a list of queue names, like ['default', "
                f"'emails'], not {queues!r} ({exc})"
            ) from None
        if not names:
            raise ImproperlyConfigured(
                f"{where}['QUEUES'] is empty: list the queues its tasks may use, or leave "
                "it out for ['default']"
            )
    options = params.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(
            f"{where}['OPTIONS'] must be a dict, like {{'DATABASE': 'default'}}, not "
            f"{type(options).__name__}"
        )
    where = f"{where}['OPTIONS']"
    unknown = _unknown(options, OPTION_KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"{where} has unknown keys {unknown}; cairnq's are {_listing(OPTION_KEYS)}"
        )
    database = options.get("DATABASE", "default")
    if not isinstance(database, str) or not database:
        raise ImproperlyConfigured(
            f"{where}['DATABASE'] must be the name of a DATABASES entry, like 'default', "
            f"not {database!r}"
        )
    schema = options.get("SCHEMA")
    try:
        check_schema(schema)
    except InvalidArgument as exc:
        raise ImproperlyConfigured(f"{where}['SCHEMA']: {exc}") from None
    max_attempts = options.get("MAX_ATTEMPTS")
    if max_attempts is not None:
        try:
            check_int(max_attempts, "MAX_ATTEMPTS", low=1)
        except InvalidArgument as exc:
            raise ImproperlyConfigured(
                f"{where}['MAX_ATTEMPTS'] must be a whole number of runs, like 3 (no "
                f"quotes), not {max_attempts!r}: {exc}"
            ) from None
    modules = options.get("TASK_MODULES", [])
    if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) for m in modules):
        raise ImproperlyConfigured(
            f"{where}['TASK_MODULES'] must be a list of module names, like "
            f"['myapp.jobs'], not {modules!r}"
        )
    return Settings(database, schema, max_attempts, list(modules))
