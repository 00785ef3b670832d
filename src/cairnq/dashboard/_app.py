"""The dashboard application: its options, its state, and how it is mounted.

The HTTP and security layer is ``_http`` (Starlette), the pages ``_pages`` and
``templates/`` (Jinja2). Payloads, results and metadata are shown through the
``redact`` hook and never logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .._checks import check_int
from ..backends import Backend, label_of
from ..client import CairnQ, SyncCairnQ
from ..errors import InvalidArgument
from ..extensions import Extension, install
from ..kernel import views as _reads
from ..models import Task, TaskPage
from ._api import ApiPart, build_api
from ._api_routes import ROUTES
from ._host import Redact
from ._http import Proxies, Security, build_app, parse_forwarded_allow_ips, route_path
from ._openapi import openapi_route
from ._pages import Pages, bare_page
from ._redact import MASK, default_redact
from ._throttle import ListThrottle

if TYPE_CHECKING:
    from ..telemetry.metrics import Metrics

__all__ = [
    "DashboardApp",
    "create_app",
    "database_label",
    "default_redact",
    "mount",
]

log = logging.getLogger("cairnq.dashboard")


class DashboardApp:
    """The dashboard ASGI application; build one with ``create_app``."""

    def __init__(
        self,
        client: CairnQ,
        *,
        owns_client: bool,
        read_only: bool,
        token: str | None,
        redact: Redact | None,
        secret: bytes | str | None,
        title: str,
        refresh_ms: int,
        worker_window_ms: int,
        page_size: int,
        trusted_origins: tuple[str, ...],
        metrics: Any = True,
        allowed_hosts: tuple[str, ...] | None = None,
        forwarded_allow_ips: Proxies | None = None,
        extensions: Sequence[Extension] = (),
    ) -> None:
        self.client = client
        # True: a Metrics of the dashboard's own, made on the first scrape; False: no /metrics.
        self.metrics: Any = metrics
        self.owns_client = owns_client
        self.read_only = read_only
        self.token = token
        self.redact: Redact = redact or default_redact
        if secret is None:
            secret = (
                hmac.new(token.encode(), b"cairnq-dashboard-secret", hashlib.sha256).digest()
                if token
                else secrets.token_bytes(32)
            )
        self.secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        self.title = title
        self.refresh_ms = refresh_ms
        self.worker_window_ms = worker_window_ms
        self.page_size = page_size
        self.trusted_hosts = frozenset(
            urlsplit(o).netloc.lower() for o in trusted_origins if urlsplit(o).netloc
        )
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )
        self.forwarded_allow_ips = forwarded_allow_ips
        self.security = Security(
            token=token,
            secret=self.secret,
            allowed_hosts=self.allowed_hosts,
            trusted_hosts=self.trusted_hosts,
            proxies=forwarded_allow_ips,
        )
        self.label = database_label(client.backend)
        self._opened = False
        self._open_lock: asyncio.Lock | None = None
        # Task listings, the costliest poll: one at a time, equal ones within a refresh
        # interval answered once.
        self.lists: ListThrottle[TaskPage] = ListThrottle(refresh_ms)
        # The overview's and workers' reads scan by queue and status: shared the same way.
        self.reads: ListThrottle[Any] = ListThrottle(refresh_ms)
        pages = Pages(self, extensions)
        # The HTTP API: cairnq's routes, then those of the page sets that serve some.
        api = [
            *ROUTES,
            *(
                r
                for part in pages.extensions
                if isinstance(part, ApiPart)
                for r in part.api_routes()
            ),
        ]
        self._asgi = build_app(
            pages.routes(),
            pages.endpoint(pages.not_found),
            self.security,
            bare_page,
            self._lifespan,
            pages.statics,
            build_api(self, [*api, openapi_route(api, title)]),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._asgi(scope, receive, send)

    @asynccontextmanager
    async def _lifespan(self, app: object) -> AsyncIterator[None]:
        yield
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client if this app created it (from a URL)."""
        if self.owns_client:
            await self.client.close()

    def csrf_token(self) -> str:
        """A token for forms: a timestamp signed with the app's secret."""
        return self.security.csrf_token()

    def safe_redact(self, field_name: str, value: Any, task: Task) -> Any:
        """The ``redact`` hook's answer; the mask when the hook raises.

        A value encrypted with a key the client lacks (or with no ``codec=``) reaches
        the hook as ``"<encrypted, v1, key '...'>"``, never as its ciphertext.
        """
        value = self.client.codec.shown(value, what=field_name, task_id=task.id)
        try:
            return self.redact(field_name, value, task)
        except Exception:
            log.exception("dashboard: the redact hook raised; hiding the value")
            return MASK

    async def ensure_open(self) -> None:
        """Open the client on the first request that reads (once, whoever asks first)."""
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self.client.open()
                self._opened = True


def database_label(backend: Backend) -> str:
    """The database in a few words, as the header shows it; never with a password."""
    return label_of(backend)


def create_app(
    client_or_url: CairnQ | Backend | str | os.PathLike[str],
    *,
    read_only: bool = False,
    token: str | None = None,
    redact: Redact | None = None,
    secret: bytes | str | None = None,
    title: str = "cairnq",
    refresh_ms: int = 2000,
    worker_window_ms: int = 60_000,
    page_size: int = 50,
    trusted_origins: tuple[str, ...] = (),
    metrics: Metrics | bool = True,
    allowed_hosts: Sequence[str] | None = None,
    forwarded_allow_ips: str | Sequence[str] | None = None,
    extensions: Sequence[Extension] = (),
) -> DashboardApp:
    """The dashboard as an ASGI application, to serve or mount inside another app.

    Args:
        client_or_url: A ``CairnQ`` client (the app uses it and never closes it), a
            ``Backend``, or a database URL / SQLite path (the app opens a client
            on first request, without creating or migrating anything, and closes
            it at ASGI lifespan shutdown).
        read_only: Hide the cancel, retry and purge actions, one task's and the
            filtered list's, and pausing and resuming schedules, and refuse them (403).
        token: When set, every request needs it (``Authorization: Bearer``, or
            ``?token=`` once, which sets an HttpOnly SameSite=Strict cookie).
        redact: ``redact(field, value, task) -> shown`` for ``payload``, ``result``,
            ``metadata`` and ``error`` (the envelope); the default
            (``default_redact``) masks values under secret-looking keys and, in
            every string, card numbers, bearer credentials and API tokens. Return
            the value unchanged to show everything.
        secret: Signs CSRF tokens; give the same secret to every process serving
            the dashboard behind one address (derived from ``token`` if given,
            else random per process).
        title: Shown in the header and the window title.
        refresh_ms: How often open pages refresh their live parts (2 s).
        worker_window_ms: A cairnq worker counts as alive when seen this recently.
        page_size: Tasks per page of the task list (50).
        trusted_origins: Extra origins (``https://admin.example.com``) allowed to
            post actions, e.g. behind a proxy that rewrites ``Host``.
        metrics: Serve a Prometheus exposition at ``/metrics`` (behind the same
            token): ``True`` (default) with the database gauges only, needing the
            ``metrics`` extra (without it, ``/metrics`` answers 501 naming it); a
            ``cairnq.telemetry.Metrics`` that also instruments this process's
            clients and workers, to serve their counters too; ``False`` for none.
        allowed_hosts: Host names (no port) the ``Host`` header may carry; others
            get 421. ``cairnq dashboard`` on a loopback address without a token
            sets it to the loopback names, so a site that rebinds its own name to
            127.0.0.1 cannot read the dashboard. ``None`` (default) checks nothing:
            a host application checks its own hosts.
        forwarded_allow_ips: The reverse proxies whose ``X-Forwarded-Host`` (for
            the cross-site check) and ``X-Forwarded-Proto`` (for the cookie's
            ``Secure``) are believed, as uvicorn's ``--forwarded-allow-ips``: IP
            addresses or networks, a list or a comma-separated string, ``"*"`` for
            any peer. Matched against the peer the ASGI server reports
            (``scope["client"]``). ``None`` (default) believes no forwarded header.
        extensions: Extensions outside cairnq whose pages (``Extension.pages``) the
            dashboard shows too, in its navigation bar after cairnq's own
            (``cairnq.extensions.install``d first).

    Returns:
        The ASGI application.

    Raises:
        InvalidArgument: a bad option, or a ``SyncCairnQ`` (the dashboard is async).

    Example::

        from starlette.applications import Starlette
        from starlette.routing import Mount
        from cairnq.dashboard import create_app

        app = Starlette(routes=[Mount("/cairnq", app=create_app(cq, read_only=True))])
    """
    if isinstance(client_or_url, SyncCairnQ):
        raise InvalidArgument(
            "the dashboard needs an async CairnQ client (or a URL), not a SyncCairnQ"
        )
    if token is not None and (
        not isinstance(token, str) or len(token) < 8 or not token.isprintable()
    ):
        raise InvalidArgument("token must be a printable string of at least 8 characters")
    if redact is not None and not callable(redact):
        raise InvalidArgument("redact must be a callable (field, value, task) -> value")
    extensions = install(extensions)
    if isinstance(client_or_url, CairnQ):
        client, owns = client_or_url, False
    elif isinstance(client_or_url, Backend):
        client, owns = CairnQ(client_or_url), True
    elif isinstance(client_or_url, (str, os.PathLike)):
        # A dashboard only looks: it never creates a database or changes its schema.
        client, owns = CairnQ(client_or_url, migrate=False), True
    else:
        raise InvalidArgument(
            f"create_app takes a CairnQ client, a Backend or a database URL, not "
            f"{type(client_or_url).__name__}"
        )
    return DashboardApp(
        client,
        owns_client=owns,
        read_only=bool(read_only),
        token=token,
        redact=redact,
        secret=secret,
        title=str(title),
        refresh_ms=check_int(refresh_ms, "refresh_ms", low=250, high=3_600_000),
        worker_window_ms=check_int(worker_window_ms, "worker_window_ms", low=1000, high=2**40),
        page_size=check_int(page_size, "page_size", low=1, high=_reads.MAX_PAGE),
        trusted_origins=tuple(trusted_origins),
        metrics=_check_metrics(metrics),
        allowed_hosts=None if allowed_hosts is None else tuple(str(h) for h in allowed_hosts),
        forwarded_allow_ips=parse_forwarded_allow_ips(forwarded_allow_ips),
        extensions=extensions,
    )


def _check_metrics(metrics: Any) -> Any:
    if isinstance(metrics, bool):
        return metrics
    if callable(getattr(metrics, "refresh", None)) and callable(
        getattr(metrics, "exposition", None)
    ):
        return metrics
    raise InvalidArgument("metrics must be True, False or a cairnq.telemetry.Metrics")


def mount(prefix: str, dashboard: ASGIApp, fallback: ASGIApp) -> ASGIApp:
    """An ASGI app sending ``prefix`` and below to ``dashboard``, everything else to ``fallback``.

    For hosts without a mount mechanism of their own, such as Django's ASGI
    handler. The dashboard sees ``root_path`` extended by ``prefix``, so its links
    stay under it.

    Example::

        # asgi.py of a Django project
        from django.core.asgi import get_asgi_application
        from cairnq.dashboard import create_app, mount

        application = mount("/cairnq", create_app("postgresql://app@db/app", token=TOKEN),
                            get_asgi_application())
    """
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise InvalidArgument("prefix must start with '/' and not end with one, e.g. '/cairnq'")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") in ("http", "websocket"):
            path = route_path(scope)
            if path == prefix or path.startswith(prefix + "/"):
                root = str(scope.get("root_path") or "") + prefix
                full = str(scope.get("path") or "/")
                child = dict(scope, root_path=root)
                if not full.startswith(root):
                    child["path"] = root + path[len(prefix) :]
                await dashboard(child, receive, send)
                return
        await fallback(scope, receive, send)

    return app
