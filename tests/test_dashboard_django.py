"""The dashboard inside a Django project's ASGI application, under a path prefix."""

from __future__ import annotations

from typing import Any

import httpx

from cairnq.dashboard import create_app, mount

from . import _django
from ._db import Database

_django.setup()


def django_application() -> Any:
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


def signed_in_cookie(*, staff: bool) -> dict[str, str]:
    """A session cookie of a new user (staff or not), made through Django's test client."""
    import secrets as _secrets

    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_user(f"u{_secrets.token_hex(4)}", is_staff=staff)
    client = Client()
    client.force_login(user)
    return {"cookie": f"sessionid={client.cookies['sessionid'].value}"}


def guarded_app() -> Any:
    from cairnq.contrib.django import dashboard_application

    return dashboard_application(django_application(), prefix="/cairnq", backend="default")


async def test_the_guarded_dashboard_sends_an_anonymous_visitor_to_the_login_page() -> None:
    async with client_for(guarded_app()) as http:
        response = await http.get("/cairnq/tasks")
    assert response.status_code == 302
    assert response.headers["location"] == "/login/?next=%2Fcairnq%2Ftasks"


async def test_the_guarded_dashboard_refuses_a_signed_in_user_who_is_not_staff() -> None:
    from asgiref.sync import sync_to_async

    cookie = await sync_to_async(signed_in_cookie)(staff=False)
    async with client_for(guarded_app()) as http:
        response = await http.get("/cairnq/", headers=cookie)
    assert response.status_code == 403


async def test_the_guarded_dashboard_shows_staff_the_tasks_of_the_django_database() -> None:
    from asgiref.sync import sync_to_async

    from .django_app import tasks

    result = await sync_to_async(tasks.add.enqueue)(1, 2, marker="dashboard")
    cookie = await sync_to_async(signed_in_cookie)(staff=True)
    async with client_for(guarded_app()) as http:
        page = await http.get("/cairnq/task", params={"id": result.id}, headers=cookie)
        django_page = await http.get("/hello")
    assert page.status_code == 200 and tasks.add.module_path in page.text
    assert django_page.text == "hello from django"
