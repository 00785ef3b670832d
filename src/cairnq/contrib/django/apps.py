"""The Django app: ``manage.py cairnq_worker`` and a start-up check of ``TASKS``."""

from __future__ import annotations

from django.apps import AppConfig


class CairnQConfig(AppConfig):  # type: ignore[misc]
    """``cairnq.contrib.django`` in ``INSTALLED_APPS``.

    At start-up every ``TASKS`` entry using ``CairnQBackend`` is made once, so a
    bad entry (a misspelt key, a value of the wrong type such as
    ``MAX_ATTEMPTS: "3"``, a database alias ``DATABASES`` lacks, an engine other
    than SQLite or PostgreSQL) stops the project with ``ImproperlyConfigured``
    then, not at the first enqueue.
    """

    name = "cairnq.contrib.django"
    label = "cairnq"
    verbose_name = "cairnq"

    def ready(self) -> None:
        from django.conf import settings

        from ._backend import CairnQBackend

        for alias, params in (getattr(settings, "TASKS", None) or {}).items():
            if params.get("BACKEND") == "cairnq.contrib.django.CairnQBackend":
                CairnQBackend(alias, params)
