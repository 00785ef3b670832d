"""``cairnq dashboard``: the web dashboard on uvicorn."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
from typing import TextIO

from .._extras import missing_extra
from ._errors import CommandError
from ._target import env_codec, require_cairnq, target_of

DASHBOARD_PORT = 8181


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port_free(host: str, port: int) -> None:
    """Refuse, before the server prints its address, an address it could not listen on.

    Binds and closes a socket as the server will (``SO_REUSEADDR``, so a port left
    in ``TIME_WAIT`` by a previous run still counts as free).

    Raises:
        CommandError: the port is taken, or the host is not an address of this machine.
    """
    try:
        found = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise CommandError(f"cannot listen on {host}: {exc.strerror}; pass --host") from None
    family, kind, proto, _, address = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(f"port {port} on {host} is in use; pass --port") from None
            raise CommandError(
                f"cannot listen on port {port} on {host}: {exc.strerror}; pass --host or --port"
            ) from None


def cmd_dashboard(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq dashboard``: serve the app with uvicorn until Ctrl-C."""
    token = args.token or os.environ.get("CAIRNQ_DASHBOARD_TOKEN") or None
    if token is None and not is_loopback(args.host):
        raise CommandError(
            f"refusing to serve the dashboard on {args.host} without a token: "
            "give --token or CAIRNQ_DASHBOARD_TOKEN, or bind to 127.0.0.1"
        )
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise missing_extra(
            "the cairnq dashboard", "dashboard", "starlette, jinja2, uvicorn"
        ) from None
    from ..client import CairnQ
    from ..dashboard import create_app
    from ..dashboard._http import parse_forwarded_allow_ips

    parse_forwarded_allow_ips(args.forwarded_allow_ips)
    target = target_of(args)
    require_cairnq(target)
    check_port_free(args.host, args.port)
    client = CairnQ(target.backend(migrate=False, tool="dashboard"), codec=env_codec())
    client._owns_backend = True
    # Without a token, only loopback names may reach it: a site rebinding its own
    # name to 127.0.0.1 would otherwise be same-origin with the dashboard.
    hosts = None if token is not None else ("localhost", "127.0.0.1", "::1", args.host.strip("[]"))
    app = create_app(
        client,
        read_only=args.read_only,
        token=token,
        allowed_hosts=hosts,
        forwarded_allow_ips=args.forwarded_allow_ips,
        extensions=getattr(args, "extensions", ()),
    )
    # The command made the client, so the app closes it when the server stops.
    app.owns_client = True
    host = f"[{args.host}]" if ":" in args.host else args.host
    notes = [target.describe()]
    if args.read_only:
        notes.append("read-only")
    if token:
        notes.append("token required: open /?token=... once")
    out.write(
        f"cairnq dashboard on http://{host}:{args.port}/ ({'; '.join(notes)}); Ctrl-C to stop\n"
    )
    out.flush()
    # The app believes forwarded headers only from --forwarded-allow-ips; uvicorn's own
    # handling would trust 127.0.0.1 by default and replace the peer address it checks.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,
    )
    return 0
