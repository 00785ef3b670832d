"""The dashboard inside a Django project's ASGI application, under a path prefix."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cairnq.dashboard import create_app, mount

from ._db import Database

django = pytest.importorskip("django", reason="Django is not installed (pip install django)")

from django.conf import settings  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402


def hello(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello from django")


urlpatterns = [path("hello", hello)]


def django_application() -> Any:
    if not settings.configured:
        settings.configure(
            ROOT_URLCONF=__name__,
            ALLOWED_HOSTS=["testserver", "app.test"],
            SECRET_KEY="test-only",
            USE_TZ=True,
            INSTALLED_APPS=[],
            MIDDLEWARE=[],
        )
        django.setup()
    from django.core.asgi import get_asgi_application

    return get_asgi_application()


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app.test")


async def test_django_serves_its_own_pages_beside_the_mounted_dashboard(db: Database) -> None:
    async with db.client() as cq:
        app = mount("/cairnq", create_app(cq), django_application())
        async with client_for(app) as http:
            response = await http.get("/hello")
    assert (response.status_code, response.text) == (200, "hello from django")


async def test_the_dashboard_mounted_in_django_links_under_its_prefix(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("mounted.task", {}, queue="reports")
        app = mount("/cairnq", create_app(cq), django_application())
        async with client_for(app) as http:
            overview = await http.get("/cairnq/")
            tasks = await http.get("/cairnq/tasks", params={"queue": "reports"})
    assert overview.status_code == 200
    assert 'href="/cairnq/tasks' in overview.text
    assert "mounted.task" in tasks.text
