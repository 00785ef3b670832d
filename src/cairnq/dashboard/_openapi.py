"""The OpenAPI 3.1 document of the HTTP API, built from its routes (``ApiRoute``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._api import API_PREFIX, ApiRequest, ApiRoute

__all__ = ["ERROR", "document", "openapi_route"]

ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"status": {"type": "integer"}, "message": {"type": "string"}},
            "required": ["status", "message"],
        }
    },
    "required": ["error"],
}
# What the guard or the API answer to any request it refuses, whatever the route.
_COMMON = {
    "400": "Bad input: an unknown or malformed parameter or body",
    "401": "No token, or a wrong one",
    "503": "The database is unavailable, or lacks a migration this route needs",
}
_ACTIONS = {
    "403": "Read-only dashboard, a cross-site request, or no CSRF token without a bearer token",
    "415": "A request body that is not application/json",
}
_STATUS_TEXT = {404: "Not found", 409: "The task is not in a status this action applies to"}
_PATH_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _operation(route: ApiRoute) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "string", "minLength": 1},
        }
        for name in _PATH_PARAM.findall(route.path)
    ]
    parameters += [
        {
            "name": param.name,
            "in": "query",
            "required": param.required,
            "description": param.description,
            "schema": dict(param.schema),
        }
        for param in route.params
    ]
    responses: dict[str, Any] = {
        "200": {
            "description": "OK",
            "content": {"application/json": {"schema": dict(route.response)}},
        }
    }
    for status, text in _COMMON.items():
        responses[status] = _error(text)
    if route.method == "POST":
        for status, text in _ACTIONS.items():
            responses[status] = _error(text)
        parameters.append(
            {
                "name": "X-CSRF-Token",
                "in": "header",
                "required": False,
                "description": "from GET /api/csrf; needed without Authorization: Bearer",
                "schema": {"type": "string", "pattern": "^[0-9]{1,12}[.][0-9a-f]{64}$"},
            }
        )
    for code in route.statuses:
        responses[str(code)] = _error(_STATUS_TEXT.get(code, "Refused"))
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
        "parameters": parameters,
        "responses": responses,
    }
    if route.body is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": dict(route.body)}},
        }
    return operation


def document(routes: Sequence[ApiRoute], title: str, root: str) -> dict[str, Any]:
    """The OpenAPI document of ``routes``, served under ``root`` (the mount point)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"{title} HTTP API",
            "version": "1",
            "description": (
                "The dashboard's reads and actions as JSON. Authenticate with "
                "Authorization: Bearer <token> when the dashboard has a token."
            ),
        },
        "servers": [{"url": f"{root}{API_PREFIX}"}],
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }


def openapi_route(routes: Sequence[ApiRoute], title: str) -> ApiRoute:
    """The route serving the document of ``routes`` (and of itself) at ``/openapi.json``."""

    async def handler(request: ApiRequest) -> Any:
        root = str(request.request.scope.get("root_path") or "")
        if root.endswith(API_PREFIX):
            root = root[: -len(API_PREFIX)]
        return document([*routes, route], title, root.rstrip("/"))

    route = ApiRoute(
        "GET",
        "/openapi.json",
        handler,
        "getOpenApi",
        "This document",
        "meta",
        response={"type": "object"},
    )
    return route
