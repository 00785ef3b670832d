"""Uniqueness over time, debounce and throttle: ``submit(unique_for=..., debounce=...,
throttle=...)``.

The feature lives in ``cairnq.extensions.uniqueness``; this module re-exports its
public names. ``docs/uniqueness.md`` describes it.
"""

from .extensions.uniqueness import NotUnique, Period, Throttle, Throttled, Uniqueness

__all__ = ["NotUnique", "Period", "Throttle", "Throttled", "Uniqueness"]
