from __future__ import annotations

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def add(a: int, b: int, *, marker: str = "") -> int:
    return a + b


@task()
def explode(marker: str) -> None:
    raise ValueError(f"exploded {marker}")


@task(takes_context=True)
def attempt_number(context, marker: str) -> int:  # type: ignore[no-untyped-def]
    return int(context.attempt)
