"""The error for an optional feature whose extra is not installed."""

from __future__ import annotations


def missing_extra(feature: str, extra: str, packages: str) -> ImportError:
    """An ``ImportError`` naming the extra that brings ``packages``, installed from source.

    The package name on PyPI belongs to another project, so the advice is always
    to install this one's extra from its source checkout.
    """
    return ImportError(
        f'{feature} needs the "{extra}" extra ({packages}): from the cairnq source '
        f'checkout, pip install ".[{extra}]"'
    )
