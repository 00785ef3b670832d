# generated from src/cairnq/extensions/logs/_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""What attempt logs add to a plain ``def`` handler's context, blocking."""

from __future__ import annotations


class SyncLogsContext:
    """``ctx.log``, mixed into ``SyncTaskContext``."""
