"""Count cairnq's public surface: ``Worker(...)``'s keywords, the client's public names
(flat methods, deprecated flat aliases, namespaces and each namespace's methods) and
``cairnq.__all__``.

    python scripts/surface_counts.py          # the installed (or PYTHONPATH's) cairnq

A name counts as a deprecated alias when its docstring starts with ``Deprecated``; a
namespace that may be called (``cq.steps(task_id)``) says so after its methods.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any

import cairnq
from cairnq import CairnQ, SyncCairnQ, Worker


def _deprecated(member: Any) -> bool:
    target = member.fget if isinstance(member, property) else member
    return (inspect.getdoc(target) or "").startswith("Deprecated")


def _namespace_class(member: property) -> type[Any] | None:
    hints = typing.get_type_hints(member.fget)
    found = hints.get("return")
    return found if inspect.isclass(found) and not found.__module__.startswith("builtins") else None


def client_counts(client: type[Any]) -> None:
    public = [n for n in dir(client) if not n.startswith("_")]
    namespaces: dict[str, list[str]] = {}
    flat, deprecated, other = [], [], []
    for name in public:
        member = inspect.getattr_static(client, name)
        if isinstance(member, property):
            kind = _namespace_class(member)
            if kind is not None and not _deprecated(member):
                methods = [m for m in dir(kind) if not m.startswith("_")]
                if "__call__" in vars(kind):
                    called = vars(kind)["__call__"]
                    methods.append("(called: deprecated)" if _deprecated(called) else "(called)")
                namespaces[name] = methods
                continue
        if _deprecated(member):
            deprecated.append(name)
        elif callable(member) or isinstance(member, (classmethod, staticmethod)):
            flat.append(name)
        else:
            other.append(name)
    print(f"{client.__name__}: {len(public)} public names")
    print(f"  methods: {len(flat)}: {', '.join(flat)}")
    print(f"  deprecated aliases: {len(deprecated)}: {', '.join(deprecated)}")
    if other:
        print(f"  other attributes: {len(other)}: {', '.join(other)}")
    print(f"  namespaces: {len(namespaces)}")
    for name, methods in namespaces.items():
        print(f"    cq.{name}: {len(methods)}: {', '.join(methods)}")


def worker_counts() -> None:
    params = list(inspect.signature(Worker.__init__).parameters.values())[1:]
    named = [p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keyword = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    print(f"Worker(...): {len(named)} named parameters ({len(keyword)} keyword-only)")
    print(f"  {', '.join(named)}")
    options = [name for e in cairnq.extensions.builtins() for name in e.options]
    compat = importlib.import_module("cairnq.worker._compat")
    state = "deprecated, each warns" if hasattr(compat, "deprecated_options") else "current"
    print(f"  the built-ins' options through **options ({state}): {len(options)}: ", end="")
    print(", ".join(options))
    if state != "current":
        print(
            "  given instead to the extension: extensions=[Limits([...]), Schedules(evaluate=...),"
        )
        print("    Snoozing(max_snoozes=...), History(record=...)]")


def main() -> None:
    worker_counts()
    client_counts(CairnQ)
    client_counts(SyncCairnQ)
    print(f"cairnq.__all__: {len(cairnq.__all__)} names")


if __name__ == "__main__":
    main()
