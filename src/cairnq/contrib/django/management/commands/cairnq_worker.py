"""``manage.py cairnq_worker``: run a cairnq worker for a Django task backend."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run the tasks of a cairnq task backend (TASKS), found in installed apps' "
        "tasks modules, TASK_MODULES and --module, until SIGINT/SIGTERM or, with "
        "--until-idle, until nothing is due."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default)")
        parser.add_argument(
            "--queue", action="append", dest="queues", help="a queue to serve (repeatable)"
        )
        parser.add_argument("--concurrency", type=int, default=1)
        parser.add_argument(
            "--module", action="append", dest="modules", default=[], help="a task module"
        )
        parser.add_argument(
            "--until-idle",
            action="store_true",
            help="return once no task of the queues is due and none is running",
        )
        parser.add_argument("--poll-interval-ms", type=int, default=500)

    def handle(self, *args: Any, **options: Any) -> None:
        from cairnq.contrib.django._api import task_backends
        from cairnq.contrib.django._backend import CairnQBackend

        alias = options["backend"]
        try:
            backend = task_backends[alias]
        except Exception as exc:
            raise CommandError(f"no task backend {alias!r}: {exc}") from exc
        if not isinstance(backend, CairnQBackend):
            raise CommandError(
                f"the task backend {alias!r} is {type(backend).__name__}, not "
                "cairnq.contrib.django.CairnQBackend"
            )
        try:
            tasks = backend.find_tasks(options["modules"])
            worker = backend.worker(
                tasks,
                queues=options["queues"],
                concurrency=options["concurrency"],
                poll_interval_ms=options["poll_interval_ms"],
            )
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"cairnq worker for {alias!r}: {len(tasks)} tasks on queues {list(worker.queues)}"
        )
        worker.serve(until_idle=options["until_idle"])
