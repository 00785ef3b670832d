"""Concurrency and rate limits, and fair shares, that every cairnq worker on the database
enforces when it claims.

The feature lives in ``cairnq.extensions.limits``; this module re-exports its
public names where they have always been imported from.
"""

from .extensions.limits import FairShare, Limit, LimitKeyError, Limits, LimitUsage

__all__ = ["FairShare", "Limit", "LimitKeyError", "LimitUsage", "Limits"]
