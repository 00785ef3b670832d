"""cairnq in a Django project: a tasks backend, a worker command, the dashboard behind auth.

Add ``"cairnq.contrib.django"`` to ``INSTALLED_APPS`` (for ``manage.py
cairnq_worker``) and name the backend in ``TASKS``::

    TASKS = {"default": {"BACKEND": "cairnq.contrib.django.CairnQBackend"}}

Tasks are Django's own (``@task`` from ``django.tasks``, or from the
``django_tasks`` backport before Django 6); see ``CairnQBackend`` and
``dashboard_application``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CairnQBackend", "dashboard_application", "staff_only"]


def __getattr__(name: str) -> Any:
    # Lazy, so listing the app in INSTALLED_APPS imports no database code.
    if name == "CairnQBackend":
        from ._backend import CairnQBackend

        return CairnQBackend
    if name in ("dashboard_application", "staff_only"):
        from . import _dashboard

        return getattr(_dashboard, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
