"""Concurrency and rate limits every cairnq worker on the database enforces when it claims.

The feature lives in ``cairnq.extensions.limits``; this module re-exports its
public names where they have always been imported from.
"""

from .extensions.limits import Limit, LimitKeyError, Limits, LimitUsage

__all__ = ["Limit", "LimitKeyError", "LimitUsage", "Limits"]
