"""Where a task comes from: its parent, its root and its correlation id, as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._checks import check_text
from .errors import InvalidArgument

__all__ = ["LINEAGE_FIELDS", "Lineage"]

LINEAGE_FIELDS = ("parent_id", "root_id", "correlation_id")


@dataclass(frozen=True)
class Lineage:
    """A task's lineage: ``submit(..., lineage=Lineage(...))``.

    Attributes:
        parent_id: The task that submitted this one (``ctx.submit`` sets it).
        root_id: The first task of the chain; a task without one is its own root.
        correlation_id: Any id of the caller's, to find related tasks with
            ``list(correlation_id=...)``.

    Each is ``None`` or a non-empty string without NUL, checked when the value
    is made.

    Raises:
        InvalidArgument: a field that is not such a string.

    Example::

        await cq.submit("invoice.send", {"id": 7}, lineage=Lineage(correlation_id="order-7"))
    """

    parent_id: str | None = None
    root_id: str | None = None
    correlation_id: str | None = None

    def __post_init__(self) -> None:
        for field in LINEAGE_FIELDS:
            check_text(getattr(self, field), field, optional=True)

    @classmethod
    def of(
        cls,
        lineage: Any,
        *,
        parent_id: Any = None,
        root_id: Any = None,
        correlation_id: Any = None,
    ) -> Lineage:
        """The lineage given as ``lineage=`` or as the three keywords, never both.

        Raises:
            InvalidArgument: ``lineage`` is not a ``Lineage`` (nor ``None``), both
                spellings are given, or a field is not a non-empty string.
        """
        keywords = {"parent_id": parent_id, "root_id": root_id, "correlation_id": correlation_id}
        if lineage is None:
            return cls(**keywords)
        if not isinstance(lineage, Lineage):
            raise InvalidArgument(f"lineage must be a cairnq.Lineage, not {type(lineage).__name__}")
        given = [name for name, value in keywords.items() if value is not None]
        if given:
            raise InvalidArgument(
                f"give lineage= or {', '.join(given)}=, not both: put every field in the Lineage"
            )
        return lineage

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> Lineage:
        """Take ``lineage`` and the three keywords out of ``options``: the lineage they give.

        Raises:
            InvalidArgument: as ``of``.
        """
        return cls.of(
            options.pop("lineage", None),
            parent_id=options.pop("parent_id", None),
            root_id=options.pop("root_id", None),
            correlation_id=options.pop("correlation_id", None),
        )

    @classmethod
    def below(cls, parent: Any) -> Lineage:
        """The lineage of a task ``parent`` submits: parent ``parent``, its root, its
        correlation id (``ctx.submit``'s defaults)."""
        return cls(parent.id, parent.root_id or parent.id, parent.correlation_id)

    def over(self, default: Lineage) -> Lineage:
        """This lineage, each field it leaves ``None`` taken from ``default``."""
        return Lineage(
            default.parent_id if self.parent_id is None else self.parent_id,
            default.root_id if self.root_id is None else self.root_id,
            default.correlation_id if self.correlation_id is None else self.correlation_id,
        )
