"""``cairnq.__all__`` is the kernel's surface and holds every name the reference SDK
exports; a name that belongs to one feature is exported by its feature's module and
still importable from ``cairnq`` itself."""

from __future__ import annotations

import importlib

import pytest

import cairnq

# protocol.md section 5.1: the reference SDK's exports.
REFERENCE = {
    *["CairnQ", "Worker", "TaskContext", "Task", "TaskDef", "TaskRef", "TaskStatus", "STATUSES"],
    *["is_terminal_status", "Conflict", "Retention", "RetentionRule", "TaskStore", "SQLiteStore"],
    *["PostgresStore", "CairnQError", "AlreadyExists", "QueueFull", "TaskTimeout", "TaskFailed"],
    *["TaskCanceled", "TaskError", "LostLease", "ProtocolVersionMismatch", "SchemaMismatch"],
    *["UnsupportedBackend", "create_pool_executor", "ListenUnavailable", "PgSession", "PgExecutor"],
    *["SerializationError", "StoreClosed", "__version__"],
}

# Feature names outside ``__all__``, by the module that exports them.
FEATURE_NAMES = {
    "cairnq.limits": ("Limit", "LimitUsage", "LimitKeyError", "Limits"),
    "cairnq.flow": ("Snooze", "Snoozes", "Pause", "Snoozing"),
    "cairnq.history": ("Attempt", "StepRecord", "History", "StepsChanged"),
    "cairnq.schedules": ("Schedule", "ScheduleSlot"),
    "cairnq.uniqueness": ("NotUnique", "Period", "Throttle", "Throttled", "Uniqueness"),
    "cairnq.encryption": ("Codec", "DecryptionError", "Encrypting", "keys_from_env"),
}


def test_all_holds_every_name_the_reference_sdk_exports() -> None:
    assert set(cairnq.__all__) >= REFERENCE


def test_every_name_in_all_is_importable() -> None:
    for name in cairnq.__all__:
        assert getattr(cairnq, name) is not None


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m, names in FEATURE_NAMES.items() for n in names]
)
def test_a_feature_name_is_exported_by_its_module_and_kept_out_of_all(
    module: str, name: str
) -> None:
    found = importlib.import_module(module)
    assert name in found.__all__
    assert name not in cairnq.__all__


# The feature names ``__all__`` listed before, by module: still importable from ``cairnq``.
FORMERLY_IN_ALL = {
    "cairnq.limits": ("Limit", "LimitUsage", "LimitKeyError"),
    "cairnq.flow": ("Snooze", "Snoozes", "Pause"),
    "cairnq.history": ("Attempt", "StepRecord"),
    "cairnq.schedules": ("Schedule", "ScheduleSlot"),
}


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m, names in FORMERLY_IN_ALL.items() for n in names]
)
def test_a_feature_name_is_still_importable_from_cairnq(module: str, name: str) -> None:
    assert getattr(cairnq, name) is getattr(importlib.import_module(module), name)


def test_the_built_in_extensions_are_exported_by_cairnq_extensions() -> None:
    exported = set(importlib.import_module("cairnq.extensions").__all__)
    assert {type(e).__name__ for e in cairnq.extensions.builtins()} <= exported
