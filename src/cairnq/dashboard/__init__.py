"""The cairnq web dashboard: queues, tasks and workers in a browser.

An ASGI application on Starlette with server-rendered Jinja2 pages, a stylesheet
and a small script shipped with the package; nothing is fetched from the
internet. It needs the ``dashboard`` extra (Starlette, Jinja2, uvicorn). Serve it
with ``cairnq dashboard``, or mount it in your own ASGI app:

Example::

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from cairnq import CairnQ
    from cairnq.dashboard import create_app

    cq = CairnQ.postgres("postgresql://app@db/app")
    app = Starlette(routes=[Mount("/cairnq", app=create_app(cq, token="s3cret-token"))])

An extension's pages (``Extension.pages``) get the dashboard's ``Pages`` as their
host: ``host.view(request)`` for what templates need, ``render`` for a template of
the extension's ``templates/`` folder, ``host.page(...)`` for the whole page. A page
set with a ``task_card(task, view)`` adds to the task page (``TaskParts``), and one
with ``api_routes()`` (``ApiPart``) adds ``ApiRoute``s to the HTTP API under ``/api``.
"""

from .._extras import missing_extra

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    raise missing_extra("the cairnq dashboard", "dashboard", "starlette, jinja2, uvicorn") from exc

from ._api import ApiError, ApiPart, ApiRequest, ApiRoute, Param
from ._app import DashboardApp, create_app, default_redact, mount
from ._pages import Pages, PartsOnly, TaskParts, render

__all__ = [
    "ApiError",
    "ApiPart",
    "ApiRequest",
    "ApiRoute",
    "DashboardApp",
    "Pages",
    "Param",
    "PartsOnly",
    "TaskParts",
    "create_app",
    "default_redact",
    "mount",
    "render",
]
