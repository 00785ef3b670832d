"""Tags and search: ``submit(..., tags=[...])``, search fields an application declares
(``Search(fields={"customer": "metadata.customer"})`` given to the client), and
``cq.search.find(...)`` by tag, field, error text, time range, status, queue and name.

A submit's tags, and the values its declared fields find in its metadata or payload,
are kept in ``cairnq_search_terms`` (migration ``x0024_search.sql``, which this
extension owns), written in the submit's own transaction; a delete (or truncate) of a
task forgets its rows (trigger). A task's error is kept in ``cairnq_search_errors``
(migration ``x0026_search_errors.sql``: its text on SQLite, scanned by a search; a
tsvector under GIN on PostgreSQL), written by a trigger when a task's error is set.
Nothing of it runs in a worker, and a submit with no tags whose client declares no field
(or whose task holds none) writes nothing more.
``docs/search.md`` describes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..._lazy import exports
from .._base import Extension, TaskRows

if TYPE_CHECKING:
    from ._model import Field, Query, check_query, check_tags
    from ._model import check_fields as check_fields
    from ._ops import TaskTerms, Terms, find, terms_of
else:
    # The model and the operations are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "Field": "._model",
            "Query": "._model",
            "TaskTerms": "._ops",
            "Terms": "._ops",
            "check_fields": "._model",
            "check_query": "._model",
            "check_tags": "._model",
            "find": "._ops",
            "terms_of": "._ops",
        },
    )

__all__ = [
    "Field",
    "Query",
    "Search",
    "TaskTerms",
    "Terms",
    "check_query",
    "check_tags",
    "find",
    "terms_of",
]


class Search(Extension):
    """The declaration: its table and migration, and the search fields a client declares.

    Args:
        fields: Search fields, each a name (an identifier) and the path of its value in
            a task's metadata or payload: ``{"customer": "metadata.customer",
            "order": "payload.order.id"}``. A client given ``Search(fields=...)``
            (``CairnQ(url, extensions=[Search(fields=...)])``) records each field its
            submits find (a string, number or boolean), so
            ``cq.search.find(where={"customer": "acme"})`` finds them.

    Raises:
        InvalidArgument: ``fields`` is not a mapping of identifiers to such paths.

    Example::

        cq = CairnQ(url, extensions=[Search(fields={"customer": "metadata.customer"})])
    """

    name = "search"
    migrations = ("x0024_search.sql", "x0026_search_errors.sql")
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_search_terms": "trigger",
        "cairnq_search_errors": "trigger",
    }
    words = ("cairnq_search_terms", "search_terms", "cairnq_search_errors", "search_errors")
    # No worker part steps aside: a search by tag or field, or a tagged submit, on a
    # database without the table is refused with SchemaIncomplete, which names it.
    says_when_missing = True
    cli = "cairnq.extensions.search._surfaces.cli"
    pages = "cairnq.extensions.search._surfaces.pages"

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.fields: tuple[Field, ...] = ()
        if fields is not None:
            from ._model import check_fields

            self.fields = check_fields(fields)

    def __repr__(self) -> str:
        shown = {f.name: ".".join((f.source, *f.path)) for f in self.fields}
        return f"Search(fields={shown!r})" if shown else "Search()"
