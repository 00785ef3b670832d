"""The dashboard inside a Django project's ASGI application, behind Django's auth."""

from __future__ import annotations

import importlib
import urllib.parse
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from starlette.types import Receive, Scope, Send

from ...dashboard import create_app, mount

__all__ = ["dashboard_application", "staff_only"]

ASGIApp = Callable[..., Any]


def staff_only(user: Any) -> bool:
    """The default rule: active staff users may see the dashboard."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_staff", False))


def dashboard_application(
    django_app: ASGIApp,
    *,
    prefix: str = "/cairnq",
    backend: str = "default",
    allow: Callable[[Any], bool] = staff_only,
    **options: Any,
) -> ASGIApp:
    """Django's ASGI application with cairnq's dashboard under ``prefix``, for allowed users.

    Requests under ``prefix`` are checked against Django's session: anonymous
    visitors are redirected to the project's sign-in page (see ``login_url``; with
    ``next``), or told how to set one when the project has none, signed-in
    users for whom ``allow(user)`` is false get 403, the others the dashboard of
    the task backend ``backend``'s database. Everything else goes to Django.

    Args:
        django_app: ``get_asgi_application()``.
        prefix: Where the dashboard lives (``/cairnq``).
        backend: The ``TASKS`` alias of a ``CairnQBackend``.
        allow: ``allow(user) -> bool``; staff only by default.
        **options: For ``cairnq.dashboard.create_app`` (``read_only``, ``title``...).

    Returns:
        An ASGI application to serve instead of ``django_app``.

    Raises:
        ImproperlyConfigured: ``django.contrib.auth`` or ``django.contrib.sessions``
            is not installed, or ``backend`` is no ``CairnQBackend``.

    Example::

        # asgi.py
        from django.core.asgi import get_asgi_application
        from cairnq.contrib.django import dashboard_application

        application = dashboard_application(get_asgi_application())
    """
    from django.apps import apps

    for needed in ("django.contrib.auth", "django.contrib.sessions"):
        if not apps.is_installed(needed):
            raise ImproperlyConfigured(
                f"the cairnq dashboard checks Django's sign-in, which needs {needed} "
                "in INSTALLED_APPS"
            )
    from ._api import task_backends
    from ._backend import CairnQBackend

    tasks_backend = task_backends[backend]
    if not isinstance(tasks_backend, CairnQBackend):
        raise ImproperlyConfigured(
            f"the task backend {backend!r} is {type(tasks_backend).__name__}, not CairnQBackend"
        )
    dashboard = create_app(tasks_backend.async_client(), **options)

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await dashboard(scope, receive, send)
            return
        user = await sync_to_async(_user_of)(scope)
        if user is None or not user.is_authenticated:
            login = await sync_to_async(login_url)()
            if login is None:
                await _respond(send, 401, NO_LOGIN_PAGE.encode(), [])
                return
            here = str(scope.get("root_path") or "") + str(scope.get("path") or "")
            here = str(scope.get("path") or "/") if here.count(prefix) > 1 else here
            query = urllib.parse.urlencode({"next": here})
            await _respond(send, 302, b"", [(b"location", f"{login}?{query}")])
            return
        if not allow(user):
            await _respond(send, 403, b"Forbidden: the cairnq dashboard is for staff.", [])
            return
        await dashboard(scope, receive, send)

    return mount(prefix, guarded, django_app)


NO_LOGIN_PAGE = (
    "Sign in first: the cairnq dashboard is for signed-in staff, and this project has no "
    "sign-in page it can find. Set LOGIN_URL in settings.py (the URL or URL name of your "
    "sign-in view), or add the admin (path('admin/', admin.site.urls)) for its sign-in page."
)


def login_url() -> str | None:
    """Where an anonymous visitor signs in: ``settings.LOGIN_URL`` when the project set
    it; else Django's default (``/accounts/login/``) when a view answers there (as with
    ``django.contrib.auth.urls`` under ``accounts/``); else the admin's sign-in page when
    the admin is routed; else ``None``.
    """
    from django.shortcuts import resolve_url
    from django.urls import NoReverseMatch, Resolver404, resolve, reverse

    if settings.is_overridden("LOGIN_URL"):
        return str(resolve_url(settings.LOGIN_URL))
    default = str(resolve_url(settings.LOGIN_URL))
    try:
        resolve(default)
    except Resolver404:
        pass
    else:
        return default
    try:
        return str(reverse("admin:login"))
    except NoReverseMatch:
        return None


def _user_of(scope: Scope) -> Any:
    """The signed-in user of a request's session cookie (``AnonymousUser`` without one)."""
    from django.contrib.auth import get_user

    cookies: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers") or []:
        if name == b"cookie":
            cookies.load(value.decode("latin-1"))
    morsel = cookies.get(settings.SESSION_COOKIE_NAME)
    request = HttpRequest()
    engine = importlib.import_module(settings.SESSION_ENGINE)
    request.session = engine.SessionStore(morsel.value if morsel else None)
    return get_user(request)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, str]]) -> None:
    raw = [(name, value.encode("latin-1")) for name, value in headers]
    raw.append((b"content-type", b"text/plain; charset=utf-8"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
