"""The dashboard's HTTP and security layer, on Starlette.

Security model:

- With a ``token``, every request must carry it: ``Authorization: Bearer <token>``,
  or the session cookie that ``?token=<token>`` sets once (HttpOnly,
  SameSite=Strict) before redirecting to the same page without the token.
- Actions (cancel, retry, purge, and retry or cancel of a filtered list) are POST
  only, carry a CSRF token signed with the app's secret, and are refused when the
  browser says the request is cross-site (``Sec-Fetch-Site``) or its ``Origin`` is
  not this host. ``X-Forwarded-Host``
  and ``X-Forwarded-Proto`` count only from the proxies named in
  ``forwarded_allow_ips``. In read-only mode they are hidden and refused with 403.
- A query string or form no page sends (too many fields, a field given twice or
  too long, percent-escapes that are not UTF-8) is answered 400 (414 for a query
  over ``MAX_QUERY_BYTES``, 413 for a body over ``MAX_BODY``), after the token
  check, like any other request.
- Below ``/api`` (the HTTP API, ``_api``) these refusals are JSON,
  ``{"error": {"status": ..., "message": ...}}``, with the same statuses.
- Every answer is sent with a Content-Security-Policy that allows only this app's
  own script and stylesheet, and forbids framing.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Lifespan, Message, Receive, Scope, Send

from ..errors import InvalidArgument

COOKIE = "cairnq_dashboard"
CSRF_MAX_AGE_S = 12 * 3600
MAX_BODY = 64 * 1024
# Query strings and forms: far above what any page or form of the dashboard sends (a
# filter value is at most 1,000 bytes, a page sends at most 10 fields).
MAX_QUERY_BYTES = 16 * 1024
MAX_FIELDS = 32
MAX_FIELD_BYTES = 2048
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# Where the guard leaves what it read of a request for the pages.
SCOPE_KEY = "cairnq.dashboard"
# Where the HTTP API is mounted; its refusals are JSON.
API_PREFIX = "/api"
# Browsers compare the attribute case-insensitively; spelled as RFC 6265bis does.
_STRICT = cast(Literal["strict"], "Strict")

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
    count = sum(1 for part in raw.split(b"&") if part)
    if count > MAX_FIELDS:
        raise InvalidArgument(f"the {what} has {count} fields, over the limit of {MAX_FIELDS}")
    try:
        text = raw.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument(f"the {what} is not valid UTF-8 once decoded") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if max(len(name.encode()), len(value.encode())) > MAX_FIELD_BYTES:
            raise InvalidArgument(
                f"a field of the {what} is over the limit of {MAX_FIELD_BYTES} bytes"
            )
        if name in fields:
            shown = f" {name!r}" if _FIELD_NAME.fullmatch(name) else ""
            raise InvalidArgument(f"the {what} gives the field{shown} more than once")
        fields[name] = value
    return fields


def bad_request(message: str, status: int = 400) -> Response:
    """A plain answer to input the dashboard refuses to read; never an internal detail."""
    return PlainTextResponse(f"bad request: {message}\n", status)


def is_api(scope: Scope) -> bool:
    """Whether the request is for the HTTP API (below ``API_PREFIX``)."""
    path = route_path(scope)
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def json_refusal(response: Response) -> Response:
    """A plain-text refusal (``bad_request``, the guard's) as the API's JSON error."""
    text = bytes(response.body).decode("utf-8", "replace").strip()
    headers = {k: v for k, v in response.headers.items() if k in ("allow", "www-authenticate")}
    body = {"error": {"status": response.status_code, "message": text}}
    return JSONResponse(body, response.status_code, headers=headers)


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


@dataclass
class Incoming:
    """What the guard read of a request, for the pages: its fields and where it came from."""

    root: str
    query: dict[str, str]
    scheme: str
    # Set only when a trusted proxy (``forwarded_allow_ips``) sent it.
    forwarded_host: str | None = None
    form: dict[str, str] = field(default_factory=dict)
    # The body of a POST, as read (at most ``MAX_BODY`` bytes), for the API's JSON.
    body: bytes = b""

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A link under the mount point; empty query values are left out."""
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v not in (None, "")]
        suffix = "?" + urlencode(pairs) if pairs else ""
        return f"{self.root}{path}{suffix}"


def incoming(request: Request) -> Incoming:
    """The guard's reading of ``request``."""
    found: Incoming = request.scope[SCOPE_KEY]
    return found


def redirect(request: Request, path: str, query: Mapping[str, Any] | None = None) -> Response:
    """303 to ``path`` under the mount point."""
    return RedirectResponse(incoming(request).url(path, query), status_code=303)


@dataclass(frozen=True)
class Security:
    """The checks every request passes: host, token, and for actions origin and CSRF."""

    token: str | None
    secret: bytes
    allowed_hosts: frozenset[str] | None
    trusted_hosts: frozenset[str]
    proxies: Proxies | None

    def csrf_token(self) -> str:
        """A token for forms: a timestamp signed with the app's secret."""
        stamp = str(int(time.time()))
        mac = hmac.new(self.secret, b"csrf:" + stamp.encode(), hashlib.sha256).hexdigest()
        return f"{stamp}.{mac}"

    def csrf_ok(self, value: str | None) -> bool:
        """Whether ``value`` is a token this app signed in the last ``CSRF_MAX_AGE_S``."""
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

    def same_origin(self, request: Request) -> bool:
        """Whether the browser says the request comes from this dashboard's own pages."""
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
        forwarded = incoming(request).forwarded_host
        if forwarded:
            hosts.add(forwarded.lower())
        return netloc in hosts or netloc in self.trusted_hosts

    def session_value(self) -> str:
        """The session cookie's value: derived from the token, never the token itself."""
        assert self.token is not None
        return hmac.new(
            self.token.encode(), b"cairnq-dashboard-session", hashlib.sha256
        ).hexdigest()

    def host_allowed(self, request: Request) -> bool:
        """Whether the ``Host`` header names one of ``allowed_hosts`` (any when unset)."""
        if self.allowed_hosts is None:
            return True
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        return host.lower() in self.allowed_hosts


class Guard:
    """ASGI middleware in front of the pages: security headers on every answer, then
    the method, host, token and input checks, in that order."""

    def __init__(
        self, app: ASGIApp, security: Security, refused: Callable[[str, str], str]
    ) -> None:
        self.app = app
        self.security = security
        # ``refused(title, message)``: the page for a request without the token.
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        send = _with_headers(send, head=str(scope.get("method", "")).upper() == "HEAD")
        scope = dict(scope)
        answer = await self._check(Request(scope, receive))
        if answer is not None:
            if is_api(scope) and answer.status_code != 303:
                answer = json_refusal(answer)
            await answer(scope, receive, send)
            return
        await self.app(_normalized(scope), receive, send)

    async def _check(self, request: Request) -> Response | None:
        """``None`` when the request may go on to the pages, else the answer."""
        if request.method not in ("GET", "HEAD", "POST"):
            return PlainTextResponse("method not allowed", 405, headers={"allow": "GET, POST"})
        if not self.security.host_allowed(request):
            # A page on another name resolving to this address (DNS rebinding) is
            # refused before it can read anything or fetch a CSRF token.
            return PlainTextResponse("unknown host name for this dashboard\n", 421)
        seen, refusal = self._read(request)
        request.scope[SCOPE_KEY] = seen
        answer = self._authenticate(request, seen)
        if answer is not None or refusal is not None:
            return answer or refusal
        if request.method == "POST":
            return await self._read_form(request, seen)
        return None

    def _read(self, request: Request) -> tuple[Incoming, Response | None]:
        scope = request.scope
        seen = Incoming(
            root=str(scope.get("root_path") or "").rstrip("/"),
            query={},
            scheme=str(scope.get("scheme") or "http"),
        )
        proxies = self.security.proxies
        if proxies is not None and proxies.trusts(scope):
            host = request.headers.get("x-forwarded-host", "").split(",")[0].strip()
            seen.forwarded_host = host or None
            proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                seen.scheme = proto
        raw = bytes(scope.get("query_string") or b"")
        if len(raw) > MAX_QUERY_BYTES:
            message = f"the query string is over the limit of {MAX_QUERY_BYTES} bytes"
            return seen, bad_request(message, 414)
        try:
            seen.query = parse_fields(raw, "query string")
        except InvalidArgument as exc:
            return seen, bad_request(str(exc))
        return seen, None

    def _authenticate(self, request: Request, seen: Incoming) -> Response | None:
        token = self.security.token
        if token is None:
            return None
        given = seen.query.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), token.encode()):
                return self._refuse(request)
            query = {k: v for k, v in seen.query.items() if k != "token"}
            # The path came decoded from the client: keep it one local, encoded path.
            path = route_path(request.scope)
            local = "/" + quote(path.lstrip("/\\"), safe="/")
            response = redirect(request, local, query)
            response.set_cookie(
                COOKIE,
                self.security.session_value(),
                path=seen.root or "/",
                httponly=True,
                samesite=_STRICT,
                secure=seen.scheme == "https",
            )
            return response
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(
            auth[7:].strip().encode(), token.encode()
        ):
            return None
        cookie = request.cookies.get(COOKIE)
        if cookie and hmac.compare_digest(cookie.encode(), self.security.session_value().encode()):
            return None
        return self._refuse(request)

    def _refuse(self, request: Request) -> Response:
        if is_api(request.scope):
            return PlainTextResponse(
                "this API needs the token: send Authorization: Bearer <token>",
                401,
                headers={"www-authenticate": "Bearer"},
            )
        text = self.refused(
            "Token required",
            "This dashboard needs its access token: open it once with ?token=..., "
            "or send Authorization: Bearer <token>.",
        )
        return Response(text, 401, headers={"www-authenticate": "Bearer"}, media_type="text/html")

    async def _read_form(self, request: Request, seen: Incoming) -> Response | None:
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                return PlainTextResponse("request body too large", 413)
            chunks.append(chunk)
        content_type = request.headers.get("content-type", "")
        seen.body = b"".join(chunks)
        if content_type.startswith("application/x-www-form-urlencoded"):
            try:
                seen.form = parse_fields(seen.body, "form")
            except InvalidArgument as exc:
                return bad_request(str(exc))
        return None


Handler = Callable[[Request], Awaitable[Response]]


class _Static(StaticFiles):
    """The packaged stylesheet and script, cacheable for a few minutes."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "public, max-age=300"
        return response


def build_app(
    routes: Sequence[tuple[str, Handler]],
    not_found: Handler,
    security: Security,
    refused: Callable[[str, str], str],
    lifespan: Lifespan[Any],
    statics: Sequence[tuple[str, str]] = (),
    api: ASGIApp | None = None,
) -> ASGIApp:
    """The dashboard as one ASGI app: the guard, then the pages and ``/static``, with
    each extension's ``static/`` folder of ``statics`` (``(name, package)``) under
    ``/static/x/<name>``, and the HTTP API ``api`` under ``/api``.

    Every page answers GET, HEAD and POST (its handler sends a POST to the actions);
    any other path gets ``not_found``. An ``HTTPException`` raised inside (``/static``
    raises 404 for a file it does not hold and 405 for a POST) is answered here as
    plain text with its status, behind the guard's headers: neither escaping as a 500
    when served alone nor reaching the exception handlers of an app it is mounted in.
    """
    table: list[BaseRoute] = [
        Route(path, handler, methods=["GET", "HEAD", "POST"]) for path, handler in routes
    ]
    if api is not None:
        table.insert(0, Mount(API_PREFIX, app=api))
    for name, package in statics:
        table.append(Mount(f"/static/x/{name}", app=_Static(packages=[(package, "static")])))
    table.append(Mount("/static", app=_Static(packages=[("cairnq.dashboard", "static")])))

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        response = await not_found(Request(scope, receive))
        await response(scope, receive, send)

    router = Router(table, redirect_slashes=False, default=default, lifespan=lifespan)
    return Guard(ExceptionMiddleware(router), security, refused)


def route_path(scope: Scope) -> str:
    """The request path below the mount point (``root_path``), as Starlette routes it."""
    path = str(scope.get("path") or "/")
    root = str(scope.get("root_path") or "")
    if root and path.startswith(root):
        if path == root:
            return "/"
        if path[len(root)] == "/":
            return path[len(root) :]
    return path


def _normalized(scope: Scope) -> Scope:
    """A copy of ``scope`` whose path below the mount point has no trailing slash, so
    ``/tasks/`` is ``/tasks`` and the mount point itself is the overview."""
    path = route_path(scope).rstrip("/") or "/"
    root = str(scope.get("root_path") or "")
    full = str(scope.get("path") or "/")
    prefix = root if root and full.startswith(root) else ""
    return dict(scope, path=prefix + path)


def _with_headers(send: Send, *, head: bool) -> Send:
    """``send`` adding the security headers to every answer, and no body to a HEAD."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["x-content-type-options"] = "nosniff"
            # Not no-referrer: under it browsers send "Origin: null" on same-origin form
            # posts, which the cross-site check must refuse.
            headers["referrer-policy"] = "same-origin"
            headers["x-frame-options"] = "DENY"
            headers["content-security-policy"] = CSP
            if "cache-control" not in headers:
                headers["cache-control"] = "no-store"
        elif message["type"] == "http.response.body" and head:
            message = dict(message, body=b"")
        await send(message)

    return wrapped
