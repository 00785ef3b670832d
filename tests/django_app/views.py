from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse

from .tasks import add


class Refused(Exception):
    pass


def enqueue_then_fail(request: HttpRequest, backend: str) -> HttpResponse:
    with transaction.atomic(using=request.GET["db"]):
        add.using(backend=backend).enqueue(1, 2, marker=request.GET["marker"])
        raise Refused("the view fails after enqueueing")


def enqueue_and_commit(request: HttpRequest, backend: str) -> HttpResponse:
    with transaction.atomic(using=request.GET["db"]):
        result = add.using(backend=backend).enqueue(2, 3, marker=request.GET["marker"])
    return JsonResponse({"id": result.id, "status": str(result.status)})


def hello(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello from django")
