"""The cairnq web dashboard: queues, tasks and workers in a browser.

A plain ASGI application with server-rendered pages, a stylesheet and a small
script shipped with the package; nothing is fetched from the internet. Serve it
with ``cairnq dashboard`` (needs the ``dashboard`` extra, i.e. uvicorn), or
mount it in your own ASGI app:

Example::

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from cairnq import CairnQ
    from cairnq.dashboard import create_app

    cq = CairnQ.postgres("postgresql://app@db/app")
    app = Starlette(routes=[Mount("/cairnq", app=create_app(cq, token="s3cret-token"))])
"""

from ._app import DashboardApp, create_app, default_redact, mount

__all__ = ["DashboardApp", "create_app", "default_redact", "mount"]
