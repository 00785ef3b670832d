"""Django's task API: ``django.tasks`` (Django 6) or the ``django-tasks`` backport."""

from __future__ import annotations

from typing import Any

try:
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django < 6: the backport, same API under another name
    try:
        from django_tasks import (
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task_backends,
        )
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import (
            InvalidTaskError,
            TaskResultDoesNotExist,
        )
        from django_tasks.signals import task_enqueued, task_finished, task_started
    except ImportError as exc:
        from ..._extras import missing_extra

        raise missing_extra("The Django tasks backend", "django", "django, django-tasks") from exc

__all__ = [
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def set_field(result: Any, name: str, value: Any) -> None:
    """Set a field of Django's frozen ``TaskResult`` (as Django's own backends do)."""
    object.__setattr__(result, name, value)
