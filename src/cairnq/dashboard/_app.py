"""The dashboard as a plain ASGI application: routing, authentication, CSRF, actions.

Security model:

- With a ``token``, every request must carry it: ``Authorization: Bearer <token>``,
  or the session cookie that ``?token=<token>`` sets once (HttpOnly,
  SameSite=Strict) before redirecting to the same page without the token.
- Actions (cancel, retry, purge) are POST only, carry a CSRF token signed with the
  app's secret, and are refused when the browser says the request is cross-site
  (``Sec-Fetch-Site``) or its ``Origin`` is not this host. ``X-Forwarded-Host``
  and ``X-Forwarded-Proto`` count only from the proxies named in
  ``forwarded_allow_ips``. In read-only mode they are hidden and refused with 403.
- A query string or form no page sends (too many fields, a field given twice or
  too long, percent-escapes that are not UTF-8) is answered 400 (414 for a query
  over ``MAX_QUERY_BYTES``), after the token check, like any other request.
- Every page is sent with a Content-Security-Policy that allows only this app's
  own script and stylesheet, and forbids framing.
- Payloads, results and metadata are shown through the ``redact`` hook and never
  logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote_to_bytes, urlsplit

from ..backends import Backend
from ..client import CairnQ, SyncCairnQ
from ..durations import parse_duration
from ..errors import DatabaseError, InvalidArgument
from ..models import TERMINAL_STATUSES, Task, TaskPage
from ..protocol import ops as _ops
from ..protocol import reads as _reads
from . import _html
from ._html import Redact, View
from ._throttle import ListThrottle

if TYPE_CHECKING:
    from ..telemetry.metrics import Metrics

log = logging.getLogger("cairnq.dashboard")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "cairnq_dashboard"
LIVE_HEADER = "x-cairnq-live"
CSRF_MAX_AGE_S = 12 * 3600
MAX_BODY = 64 * 1024
# Query strings and forms: far above what any page or form of the dashboard sends (a
# filter value is at most 1,000 bytes, a page sends at most 10 fields).
MAX_QUERY_BYTES = 16 * 1024
MAX_FIELDS = 32
MAX_FIELD_BYTES = 2048
PURGE_BATCH = 1000
PURGE_MAX_BATCHES = 100
ACTIVITY_WINDOW_MS = 3_600_000
ACTIVITY_BUCKET_MS = 120_000
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECRET_KEYS = re.compile(
    r"pass(word|wd)?|secret|token|api[-_]?key|auth|credential|private[-_]?key|cookie|session"
    r"|signature|ssn|card[-_]?number|cvv",
    re.IGNORECASE,
)
MASK = "••••••"


def default_redact(field: str, value: Any, task: Task) -> Any:
    """The default ``redact`` hook: masks values under keys that look like secrets.

    Any key, at any depth, matching password, secret, token, api_key, auth,
    credential, private_key, cookie, session, signature and the like has its
    value replaced by ``"••••••"``. Everything else is shown as stored.

    Args:
        field: ``"payload"``, ``"result"`` or ``"metadata"``.
        value: The decoded JSON value.
        task: The task it belongs to.

    Returns:
        The value to display.
    """
    return _mask(value)


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and SECRET_KEYS.search(k) else _mask(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


@dataclass
class Request:
    """The parts of an ASGI HTTP request the dashboard reads."""

    method: str
    path: str
    root: str
    query: dict[str, str]
    headers: dict[str, str]
    scheme: str
    form: dict[str, str] = field(default_factory=dict)
    # Set only when a trusted proxy (``forwarded_allow_ips``) sent it.
    forwarded_host: str | None = None
    # The answer to a query or body the dashboard refuses to read; sent after the
    # token check, so an unauthenticated client learns nothing from it.
    refusal: Response | None = None

    def cookie(self, name: str) -> str | None:
        # Split by hand: SimpleCookie stops at the first cookie it dislikes, and a
        # host application's cookies may come first in the header.
        for part in self.headers.get("cookie", "").split(";"):
            key, sep, value = part.partition("=")
            if sep and key.strip() == name:
                return value.strip().strip('"')
        return None


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def route_path(scope: Scope) -> str:
    """The request path below the mount point (``root_path``), as Starlette computes it."""
    path = str(scope.get("path") or "/")
    root = str(scope.get("root_path") or "")
    if root and path.startswith(root):
        if path == root:
            return "/"
        if path[len(root)] == "/":
            return path[len(root) :]
    return path


_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def parse_fields(raw: bytes, what: str) -> dict[str, str]:
    """``a=1&b=x+y`` (a query string or a form body) as a dict of text.

    Percent-escapes are decoded as UTF-8 and ``+`` as a space; a field without
    ``=`` has the value ``""``. Messages never repeat the input, only a short
    plain field name.

    Raises:
        InvalidArgument: more than ``MAX_FIELDS`` fields, a name or value over
            ``MAX_FIELD_BYTES`` decoded, a field given twice, or escapes that do not
            decode as UTF-8.
    """
    parts = [part for part in raw.split(b"&") if part]
    if len(parts) > MAX_FIELDS:
        raise InvalidArgument(f"the {what} has {len(parts)} fields, over the limit of {MAX_FIELDS}")
    fields: dict[str, str] = {}
    for part in parts:
        name_raw, _, value_raw = part.partition(b"=")
        name_bytes = unquote_to_bytes(name_raw.replace(b"+", b" "))
        value_bytes = unquote_to_bytes(value_raw.replace(b"+", b" "))
        if max(len(name_bytes), len(value_bytes)) > MAX_FIELD_BYTES:
            raise InvalidArgument(
                f"a field of the {what} is over the limit of {MAX_FIELD_BYTES} bytes"
            )
        try:
            name = name_bytes.decode("utf-8")
            value = value_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument(f"the {what} is not valid UTF-8 once decoded") from None
        if name in fields:
            shown = f" {name!r}" if _FIELD_NAME.fullmatch(name) else ""
            raise InvalidArgument(f"the {what} gives the field{shown} more than once")
        fields[name] = value
    return fields


def _bad_request(message: str, status: int = 400) -> Response:
    return Response(status, f"bad request: {message}\n".encode(), "text/plain; charset=utf-8")


@dataclass(frozen=True)
class Proxies:
    """The peers whose forwarded headers the dashboard believes (``forwarded_allow_ips``)."""

    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    any_peer: bool = False

    def trusts(self, scope: Scope) -> bool:
        """Whether the peer the server reports (``scope["client"]``) is one of them."""
        if self.any_peer:
            return True
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(str(client[0]))
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)


def parse_forwarded_allow_ips(value: str | Sequence[str] | None) -> Proxies | None:
    """``forwarded_allow_ips`` as ``Proxies``; ``None`` believes no forwarded header.

    Takes what uvicorn's ``--forwarded-allow-ips`` takes: a comma-separated string
    or a list of IP addresses, networks (``10.0.0.0/8``) and ``*`` (any peer).
    Unlike uvicorn, an entry that is none of these is refused rather than kept as
    a literal that never matches.

    Raises:
        InvalidArgument: an entry that is not an address, a network or ``*``, or none at all.
    """
    if value is None:
        return None
    entries = [str(e).strip() for e in (value.split(",") if isinstance(value, str) else value)]
    networks = []
    for entry in entries:
        if entry == "*":
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            raise InvalidArgument(
                f"forwarded_allow_ips entry {entry!r} is not an IP address, a network or '*'"
            ) from None
    if not entries:
        raise InvalidArgument("forwarded_allow_ips names no proxy; leave it unset to trust none")
    return Proxies(tuple(networks), any_peer="*" in entries)


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
        self.label = _label(client.backend)
        self._opened = False
        self._open_lock: asyncio.Lock | None = None
        self._static: dict[str, bytes] = {}
        # Task listings, the costliest poll: one at a time, equal ones within a refresh
        # interval answered once.
        self._lists: ListThrottle[TaskPage] = ListThrottle(refresh_ms)
        # The overview's and workers' reads scan by queue and status: shared the same way.
        self._reads: ListThrottle[Any] = ListThrottle(refresh_ms)

    # --- ASGI ----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            return
        request = self._request(scope)
        if request.method == "POST":
            body = await self._read_body(receive)
            if body is None:
                request.refusal = request.refusal or Response(413, b"request body too large")
            elif request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"
            ):
                try:
                    request.form = parse_fields(body, "form")
                except InvalidArgument as exc:
                    request.refusal = request.refusal or _bad_request(str(exc))
        try:
            response = await self._handle(request)
        except DatabaseError as exc:
            log.warning("dashboard: database error: %s: %s", type(exc).__name__, exc)
            response = self._html(
                503,
                _html.error_page(
                    self._view(request),
                    "Database unavailable",
                    f"{type(exc).__name__}; the details were logged.",
                ),
            )
        except Exception:
            log.exception("dashboard: request failed")
            response = self._html(
                500,
                _html.error_page(
                    self._view(request), "Something went wrong", "The error was logged."
                ),
            )
        await self._send(send, request, response)

    def _request(self, scope: Scope) -> Request:
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []
        }
        request = Request(
            method=str(scope.get("method", "GET")).upper(),
            path=route_path(scope),
            root=str(scope.get("root_path") or "").rstrip("/"),
            query={},
            headers=headers,
            scheme=str(scope.get("scheme") or "http"),
        )
        if self.forwarded_allow_ips is not None and self.forwarded_allow_ips.trusts(scope):
            host = headers.get("x-forwarded-host", "").split(",")[0].strip()
            request.forwarded_host = host or None
            proto = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                request.scheme = proto
        raw = bytes(scope.get("query_string") or b"")
        if len(raw) > MAX_QUERY_BYTES:
            request.refusal = _bad_request(
                f"the query string is over the limit of {MAX_QUERY_BYTES} bytes", 414
            )
            return request
        try:
            request.query = parse_fields(raw, "query string")
        except InvalidArgument as exc:
            request.refusal = _bad_request(str(exc))
        return request

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """Close the client if this app created it (from a URL)."""
        if self.owns_client:
            await self.client.close()

    async def _read_body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks)
            chunk = bytes(message.get("body") or b"")
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _send(self, send: Send, request: Request, response: Response) -> None:
        headers = [
            (b"content-type", response.content_type.encode()),
            (b"content-length", str(len(response.body)).encode()),
            (b"x-content-type-options", b"nosniff"),
            # Not no-referrer: under it browsers send "Origin: null" on same-origin form
            # posts, which the cross-site check must refuse.
            (b"referrer-policy", b"same-origin"),
            (b"x-frame-options", b"DENY"),
            (b"content-security-policy", CSP.encode()),
        ]
        if not any(k.lower() == "cache-control" for k, _ in response.headers):
            headers.append((b"cache-control", b"no-store"))
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        body = b"" if request.method == "HEAD" else response.body
        await send({"type": "http.response.body", "body": body})

    # --- helpers -------------------------------------------------------------------------

    def _html(self, status: int, text: str) -> Response:
        return Response(status, text.encode("utf-8"))

    def _view(self, request: Request) -> View:
        return View(
            root=request.root,
            read_only=self.read_only,
            csrf=self.csrf_token(),
            refresh_ms=self.refresh_ms,
            title=self.title,
            label=self.label,
            now_ms=_html.now_ms(),
            redact=self._safe_redact,
        )

    def _safe_redact(self, field_name: str, value: Any, task: Task) -> Any:
        try:
            return self.redact(field_name, value, task)
        except Exception:
            log.exception("dashboard: the redact hook raised; hiding the value")
            return MASK

    def _redirect(
        self, request: Request, path: str, query: Mapping[str, Any] | None = None
    ) -> Response:
        location = self._view(request).url(path, query)
        return Response(303, b"", headers=[("location", location)])

    async def _ensure_open(self) -> None:
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self.client.open()
                self._opened = True

    # --- security ------------------------------------------------------------------------

    def csrf_token(self) -> str:
        """A token for forms: a timestamp signed with the app's secret."""
        stamp = str(int(time.time()))
        mac = hmac.new(self.secret, b"csrf:" + stamp.encode(), hashlib.sha256).hexdigest()
        return f"{stamp}.{mac}"

    def _csrf_ok(self, value: str | None) -> bool:
        if not value or "." not in value:
            return False
        stamp, mac = value.split(".", 1)
        if not stamp.isdigit():
            return False
        expected = hmac.new(self.secret, b"csrf:" + stamp.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, expected):
            return False
        age = time.time() - int(stamp)
        return -60 <= age <= CSRF_MAX_AGE_S

    def _same_origin(self, request: Request) -> bool:
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("origin")
        if origin is None:
            return True
        if origin == "null":
            return False
        netloc = urlsplit(origin).netloc.lower()
        hosts = {request.headers.get("host", "").lower()}
        if request.forwarded_host:
            hosts.add(request.forwarded_host.lower())
        return netloc in hosts or netloc in self.trusted_hosts

    def _session_value(self) -> str:
        assert self.token is not None
        return hmac.new(
            self.token.encode(), b"cairnq-dashboard-session", hashlib.sha256
        ).hexdigest()

    def _host_allowed(self, request: Request) -> bool:
        if self.allowed_hosts is None:
            return True
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        return host.lower() in self.allowed_hosts

    def _authenticate(self, request: Request) -> Response | None:
        """``None`` when the request may proceed, else the response that refuses or redirects."""
        if not self._host_allowed(request):
            # A page on another name resolving to this address (DNS rebinding) is
            # refused before it can read anything or fetch a CSRF token.
            return Response(421, b"unknown host name for this dashboard\n", "text/plain")
        if self.token is None:
            return None
        given = request.query.get("token")
        if given is not None:
            if hmac.compare_digest(given.encode(), self.token.encode()):
                query = {k: v for k, v in request.query.items() if k != "token"}
                # The path came decoded from the client: keep it one local, encoded path.
                local = "/" + quote(request.path.lstrip("/\\"), safe="/")
                response = self._redirect(request, local, query)
                secure = "; Secure" if request.scheme == "https" else ""
                cookie_path = request.root or "/"
                response.headers.append(
                    (
                        "set-cookie",
                        f"{COOKIE}={self._session_value()}; Path={cookie_path}; HttpOnly; "
                        f"SameSite=Strict{secure}",
                    )
                )
                return response
            return self._refuse()
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(
            auth[7:].strip().encode(), self.token.encode()
        ):
            return None
        cookie = request.cookie(COOKIE)
        if cookie and hmac.compare_digest(cookie.encode(), self._session_value().encode()):
            return None
        return self._refuse()

    def _refuse(self) -> Response:
        text = _html.bare_page(
            "Token required",
            "This dashboard needs its access token: open it once with ?token=..., "
            "or send Authorization: Bearer <token>.",
        )
        return Response(401, text.encode(), headers=[("www-authenticate", "Bearer")])

    # --- routing -------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD", "POST"):
            return Response(405, b"method not allowed", "text/plain", [("allow", "GET, POST")])
        refused = self._authenticate(request) or request.refusal
        if refused is not None:
            return refused
        path = request.path.rstrip("/") or "/"
        if path.startswith("/static/"):
            return self._static_file(path[len("/static/") :])
        if request.method == "POST":
            return await self._action(request, path)
        await self._ensure_open()
        if path == "/metrics":
            return await self._metrics()
        pages: dict[str, Callable[[Request], Awaitable[Response]]] = {
            "/": self._overview,
            "/tasks": self._tasks,
            "/task": self._task,
            "/task/cancel": self._confirm_cancel,
            "/task/retry": self._confirm_retry,
            "/purge": self._confirm_purge,
            "/workers": self._workers,
        }
        handler = pages.get(path)
        if handler is None:
            return self._html(404, _html.error_page(self._view(request), "Not found", path))
        return await handler(request)

    async def _metrics(self) -> Response:
        if self.metrics is False:
            return Response(404, b"not found", "text/plain")
        try:
            from ..telemetry.metrics import CONTENT_TYPE, Metrics
        except ImportError as exc:
            return Response(404, f"{exc}\n".encode(), "text/plain")
        if self.metrics is True:
            self.metrics = Metrics()
        await self.metrics.refresh(self.client)
        return Response(200, self.metrics.exposition(), CONTENT_TYPE)

    def _static_file(self, name: str) -> Response:
        suffix = os.path.splitext(name)[1]
        if name not in ("dashboard.css", "dashboard.js") or suffix not in STATIC_TYPES:
            return Response(404, b"not found", "text/plain")
        if name not in self._static:
            folder = resources.files("cairnq.dashboard") / "static"
            self._static[name] = (folder / name).read_bytes()
        return Response(
            200,
            self._static[name],
            STATIC_TYPES[suffix],
            [("cache-control", "public, max-age=300")],
        )

    def _live(self, request: Request) -> bool:
        return request.headers.get(LIVE_HEADER) == "1"

    def _render(
        self,
        request: Request,
        *,
        title: str,
        active: str,
        body: str,
        live: str,
        status: int = 200,
    ) -> Response:
        """``body`` then the live region ``live``; a refresh gets only the region."""
        region = _html.part("main", live)
        if self._live(request):
            return self._html(status, region)
        view = self._view(request)
        page = _html.page(view, title=title, active=active, body=body + region, live=True)
        return self._html(status, page)

    # --- pages ---------------------------------------------------------------------------

    async def _overview(self, request: Request) -> Response:
        view = self._view(request)

        async def load() -> Any:
            summaries = await self.client.overview()
            activity = await self.client.activity(
                window_ms=ACTIVITY_WINDOW_MS, bucket_ms=ACTIVITY_BUCKET_MS
            )
            return summaries, activity, await self._load_workers()

        summaries, activity, workers = await self._reads.get("overview", load)
        live = _html.overview_live(view, summaries, activity, len(workers))
        return self._render(request, title="Overview", active="overview", body="", live=live)

    async def _tasks(self, request: Request) -> Response:
        view = self._view(request)
        filters = {
            k: request.query[k].strip()
            for k in _html.TASK_FILTERS
            if request.query.get(k, "").strip()
        }
        cursor = request.query.get("cursor") or None
        notice = ""
        if "purged" in request.query and request.query["purged"].isdigit():
            count = int(request.query["purged"])
            more = " More remain: purge again." if request.query.get("more") == "1" else ""
            notice = _html.notice(f"Purged {count} task{'' if count == 1 else 's'}.{more}")

        def load() -> Awaitable[TaskPage]:
            return self.client.list_page(
                status=filters.get("status"),
                queue=filters.get("queue"),
                name=filters.get("name"),
                key=filters.get("key"),
                root_id=filters.get("root_id"),
                correlation_id=filters.get("correlation_id"),
                id_prefix=filters.get("id_prefix"),
                cursor=cursor,
                limit=self.page_size,
            )

        try:
            page = await self._lists.get((tuple(sorted(filters.items())), cursor), load)
        except InvalidArgument as exc:
            body = notice + _html.filters_form(view, filters)
            live = _html.notice(str(exc), "error")
            return self._render(
                request, title="Tasks", active="tasks", body=body, live=live, status=400
            )
        body = notice + _html.filters_form(view, filters)
        live = _html.tasks_live(view, page, filters, cursor)
        return self._render(request, title="Tasks", active="tasks", body=body, live=live)

    async def _load_task(self, request: Request, *, light: bool = False) -> Task | Response:
        """The task named by ``?id=``, or the error page; ``light`` leaves out payload,
        result and metadata unless the task has finished (its result is then shown)."""
        task_id = request.query.get("id", "")
        view = self._view(request)
        try:
            if light:
                task = await self.client._run(_reads.get_light(task_id), write=False)
                if task is not None and task.is_terminal:
                    task = await self.client.get(task_id)
            else:
                task = await self.client.get(task_id)
        except InvalidArgument as exc:
            return self._html(400, _html.error_page(view, "Bad task id", str(exc)))
        if task is None:
            return self._html(
                404, _html.error_page(view, "No such task", f"No task has the id {task_id!r}.")
            )
        return task

    async def _task(self, request: Request) -> Response:
        # A refresh reads no payload: a running task is polled every refresh_ms.
        found = await self._load_task(request, light=self._live(request))
        if isinstance(found, Response):
            return found
        task = found
        view = self._view(request)
        run = self.client._run
        kids = await run(_reads.children(task), write=False)
        done = request.query.get("done", "")
        notice = _html.notice(_html.NOTICES[done]) if done in _html.NOTICES else ""
        if self._live(request):
            # A finished task carries a mark that stops the refreshing: it will not change
            # by itself.
            return self._html(200, _html.task_parts(view, task, kids))
        key = await run(_reads.task_key(task.id), write=False)
        page = _html.page(
            view,
            title=f"{task.name} {task.id}",
            active="tasks",
            body=notice + _html.task_page_body(view, task, key, kids),
            live=True,
            final=task.is_terminal,
        )
        return self._html(200, page)

    async def _confirm_cancel(self, request: Request) -> Response:
        return await self._confirm_task(request, "cancel")

    async def _confirm_retry(self, request: Request) -> Response:
        return await self._confirm_task(request, "retry")

    async def _confirm_task(self, request: Request, action: str) -> Response:
        if self.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        found = await self._load_task(request)
        if isinstance(found, Response):
            return found
        view = self._view(request)
        body = _html.confirm_task(view, found, action)
        return self._html(200, _html.page(view, title=f"{action} task", active="tasks", body=body))

    async def _confirm_purge(self, request: Request) -> Response:
        if self.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        view = self._view(request)
        filters = {
            k: request.query[k]
            for k in ("status", "queue", "name", "older_than")
            if request.query.get(k)
        }
        if filters.get("status") not in TERMINAL_STATUSES:
            filters.pop("status", None)
        body = _html.confirm_purge(view, filters)
        return self._html(200, _html.page(view, title="Purge", active="tasks", body=body))

    async def _workers(self, request: Request) -> Response:
        view = self._view(request)
        workers = await self._reads.get("workers", self._load_workers)
        live = _html.workers_live(view, workers, self.worker_window_ms)
        return self._render(request, title="Workers", active="workers", body="", live=live)

    async def _load_workers(self) -> Any:
        return await self.client.workers(within_ms=self.worker_window_ms)

    def _forbidden(self, request: Request, message: str) -> Response:
        return self._html(403, _html.error_page(self._view(request), "Forbidden", message))

    # --- actions -------------------------------------------------------------------------

    async def _action(self, request: Request, path: str) -> Response:
        if self.read_only:
            return self._forbidden(request, "This dashboard is read-only: actions are disabled.")
        if path not in ("/task/cancel", "/task/retry", "/purge"):
            return self._html(404, _html.error_page(self._view(request), "Not found", path))
        if not self._same_origin(request):
            return self._forbidden(request, "Cross-site request refused.")
        if not self._csrf_ok(request.form.get("csrf")):
            return self._forbidden(
                request, "The form expired or did not come from this dashboard; reload and retry."
            )
        await self._ensure_open()
        if path == "/purge":
            response = await self._purge(request)
            self._lists.clear()
            self._reads.clear()
            return response
        task_id = request.query.get("id") or request.form.get("id", "")
        if path == "/task/cancel":
            task = await self._call(request, self.client.cancel, task_id)
            if isinstance(task, Response):
                return task
            if task is None:
                done = "not_cancelable"
            else:
                done = "canceled" if task.is_canceled else "cancel_requested"
        else:
            reset = request.form.get("reset_attempt") == "1"
            task = await self._call(request, self.client.retry, task_id, reset_attempt=reset)
            if isinstance(task, Response):
                return task
            done = "retried" if task is not None else "not_retryable"
        self._lists.clear()
        self._reads.clear()
        log.info("dashboard: %s %s -> %s", path.rsplit("/", 1)[-1], task_id, done)
        return self._redirect(request, "/task", {"id": task_id, "done": done})

    async def _call(
        self, request: Request, method: Callable[..., Awaitable[Task | None]], *args: Any, **kw: Any
    ) -> Task | Response | None:
        try:
            return await method(*args, **kw)
        except InvalidArgument as exc:
            return self._html(400, _html.error_page(self._view(request), "Bad request", str(exc)))

    async def _purge(self, request: Request) -> Response:
        form = request.form
        filters = {k: form.get(k, "").strip() for k in ("status", "queue", "name", "older_than")}
        view = self._view(request)
        try:
            older = parse_duration(filters["older_than"] or "0s")
            status = filters["status"] or None
            if status is not None and status not in TERMINAL_STATUSES:
                raise InvalidArgument("status must be succeeded, failed or canceled")
            total = 0
            more = False
            for batch in range(PURGE_MAX_BATCHES):
                ids = await self.client.purge(
                    older_than_ms=older,
                    status=status,
                    queue=filters["queue"] or None,
                    name=filters["name"] or None,
                    limit=PURGE_BATCH,
                )
                total += len(ids)
                if len(ids) < PURGE_BATCH:
                    break
                more = batch == PURGE_MAX_BATCHES - 1
        except InvalidArgument as exc:
            body = _html.confirm_purge(view, {k: v for k, v in filters.items() if v}, str(exc))
            return self._html(400, _html.page(view, title="Purge", active="tasks", body=body))
        log.info("dashboard: purged %d tasks", total)
        query: dict[str, Any] = {"purged": total}
        if more:
            query["more"] = 1
        return self._redirect(request, "/tasks", query)


def _label(backend: Backend) -> str:
    """The database in a few words, never with a password."""
    return backend.label


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
) -> DashboardApp:
    """The dashboard as an ASGI application, to serve or mount inside another app.

    Args:
        client_or_url: A ``CairnQ`` client (the app uses it and never closes it), a
            ``Backend``, or a database URL / SQLite path (the app opens a client
            on first request, without creating or migrating anything, and closes
            it at ASGI lifespan shutdown).
        read_only: Hide the cancel, retry and purge actions and refuse them (403).
        token: When set, every request needs it (``Authorization: Bearer``, or
            ``?token=`` once, which sets an HttpOnly SameSite=Strict cookie).
        redact: ``redact(field, value, task) -> shown`` for ``payload``, ``result``
            and ``metadata``; the default masks secret-looking keys
            (``default_redact``). Return the value unchanged to show everything.
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
            ``metrics`` extra (without it, ``/metrics`` answers 404 naming it); a
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
        refresh_ms=_ops.check_int(refresh_ms, "refresh_ms", low=250, high=3_600_000),
        worker_window_ms=_ops.check_int(worker_window_ms, "worker_window_ms", low=1000, high=2**40),
        page_size=_ops.check_int(page_size, "page_size", low=1, high=_reads.MAX_PAGE),
        trusted_origins=tuple(trusted_origins),
        metrics=_check_metrics(metrics),
        allowed_hosts=None if allowed_hosts is None else tuple(str(h) for h in allowed_hosts),
        forwarded_allow_ips=parse_forwarded_allow_ips(forwarded_allow_ips),
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
