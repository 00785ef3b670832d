"""Retention: periodic purges of terminal tasks by age (``Retention``, ``RetentionRule``).

Kept as an import path; the code lives in ``cairnq.kernel.retention``.
"""

from __future__ import annotations

from .kernel.retention import Retention, RetentionRule, RetentionSweeper, SyncRetentionSweeper

__all__ = ["Retention", "RetentionRule", "RetentionSweeper", "SyncRetentionSweeper"]
