"""The import graph of ``src/cairnq``: no circles, and no import from a layer above.

Every import counts: top-level, function-local and under ``TYPE_CHECKING``, since
each is a dependency a reader must follow and a circle any of them closes is a
design coupling even when Python never trips on it. Circles are looked for twice:
between modules, and between packages (a package importing one that imports it
back, whichever modules the two directions go through). The module check has no
allow-list. The package check lists the package imports that close a circle today
(``PACKAGE_EDGES_KNOWN``) and the layer check the imports that reach a layer above
today (``UPWARD_KNOWN``); both lists may only shrink, and an entry that no longer
holds fails until it is removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cairnq.extensions import builtins

SRC = Path(__file__).resolve().parents[1] / "src" / "cairnq"

# The declared layer order, lowest first; a module belongs to the first layer naming it
# (``pkg.*`` names a package and everything under it). What no layer names is in the
# top layer, and so is what ``SURFACES`` names. An import may reach its own layer or
# one below, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "leaves",
        (
            "cairnq.errors",
            "cairnq.models",
            "cairnq._json",
            "cairnq._sealing",
            "cairnq._ids",
            "cairnq._clock",
            "cairnq.durations",
            "cairnq.lineage",
            "cairnq.backoff",
            "cairnq.logging",
            "cairnq._aio",
            "cairnq._handoff",
            "cairnq._checks",
            "cairnq._events",
            "cairnq._crashpoints",
            "cairnq._extras",
            "cairnq._filewatch",
            "cairnq._loop_end",
            "cairnq._readiness",
            "cairnq._wait",
            "cairnq._deprecated",
            "cairnq._lazy",
        ),
    ),
    (
        "protocol",
        (
            "cairnq.protocol",
            "cairnq.protocol.statements",
            "cairnq.protocol.steps",
        ),
    ),
    ("seam and backends", ("cairnq._wakeups", "cairnq.backends.*")),
    # The operations on the protocol's own tables, naming no feature.
    ("kernel", ("cairnq.kernel.*",)),
    # The extensions, each feature in its folder.
    ("extensions", ("cairnq.extensions.*",)),
)
TOP = "everything else"

# The extensions' modules that build on the client, the CLI and the dashboard: their
# commands and pages (``Extension.cli``, ``Extension.pages``), in the top layer. The
# CLI and the dashboard import them by the names the extensions declare, and no
# module below imports them.
SURFACES: tuple[str, ...] = (
    "cairnq.extensions.batches._surfaces.*",
    "cairnq.extensions.history._surfaces.*",
    "cairnq.extensions.limits._surfaces.*",
    "cairnq.extensions.logs._surfaces.*",
    "cairnq.extensions.pauses._surfaces.*",
    "cairnq.extensions.policies._surfaces.*",
    "cairnq.extensions.presence._surfaces.*",
    "cairnq.extensions.schedules._surfaces.*",
    "cairnq.extensions.search._surfaces.*",
    "cairnq.extensions.snooze._surfaces.*",
    "cairnq.extensions.steps._surfaces.*",
    "cairnq.extensions.waits._surfaces.*",
    "cairnq.extensions.workflows._surfaces.*",
)

# Package imports (importer, imported) that close a package circle today, each with
# what it is; the package check leaves them out. The list may only shrink: an entry
# whose import is gone fails until it is removed.
PACKAGE_EDGES_KNOWN: dict[tuple[str, str], str] = {}

# Imports (importer, imported) that reach a layer above today; none. The list may only
# shrink, so it stays empty.
UPWARD_KNOWN: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    """One import of a module of the package: where it is and what it reaches."""

    source: str
    target: str
    line: int


def modules(root: Path) -> dict[str, Path]:
    """Every module under the package folder ``root``, by dotted name (a package by its own)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest dotted prefix of ``name`` that is a module of the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> list[Import]:
    """Every import, anywhere in each module, of another module of the package under ``root``.

    ``from m import n`` reaches ``m.n`` when that is a module, else ``m``.
    """
    known = modules(root)
    found = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join([*base, node.module] if node.module else base)
                else:
                    prefix = node.module or ""
                names = [
                    f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix
                    for a in node.names
                ]
            for name in names:
                target = _known(name, known)
                if target is not None and target != module:
                    found.append(Import(module, target, node.lineno))
    return found


def circles(edges: Iterable[Import]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def unit_of(module: str, known: Mapping[str, Path]) -> str:
    """The package ``module`` counts in at package level: a package counts as itself,
    a module in its package, and a module at the root of the tree as itself."""
    if known[module].name == "__init__.py" or "." not in module.rpartition(".")[0]:
        return module
    return module.rpartition(".")[0]


def package_imports(root: Path) -> list[Import]:
    """The imports between packages (see ``unit_of``) under ``root``, by the packages'
    names; one package importing another inside it, or around it, is no package import."""
    known = modules(root)
    found = []
    for edge in imports(root):
        source, target = unit_of(edge.source, known), unit_of(edge.target, known)
        if source == target or target.startswith(source + ".") or source.startswith(target + "."):
            continue
        found.append(Import(source, target, edge.line))
    return found


def layer_of(module: str, layers: Sequence[tuple[str, tuple[str, ...]]]) -> int:
    """The position of ``module``'s layer in ``layers``; ``len(layers)`` is the top layer."""
    if _named(module, SURFACES):
        return len(layers)
    for position, (_, names) in enumerate(layers):
        if _named(module, names):
            return position
    return len(layers)


def _named(module: str, names: Iterable[str]) -> bool:
    """Whether one of ``names`` names ``module`` (``pkg.*``: the package and what is under it)."""
    return any(
        module == name.removesuffix(".*") or (name.endswith(".*") and module.startswith(name[:-1]))
        for name in names
    )


def upward(
    edges: Iterable[Import], layers: Sequence[tuple[str, tuple[str, ...]]]
) -> dict[tuple[str, str], Import]:
    """The imports that reach a layer above their module's, by (source, target)."""
    return {
        (e.source, e.target): e
        for e in edges
        if layer_of(e.target, layers) > layer_of(e.source, layers)
    }


def _name(position: int, layers: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    return layers[position][0] if position < len(layers) else TOP


def _show(circle: frozenset[str]) -> str:
    return " <-> ".join(sorted(circle))


# --- the package ---------------------------------------------------------------------------


def test_no_module_is_in_an_import_circle_but_those_listed() -> None:
    found = circles(imports(SRC))
    new = sorted(_show(c) for c in found)
    assert not new, "import circles (every import kind counts):\n" + "\n".join(new)


def test_no_package_is_in_an_import_circle_but_through_the_known_imports() -> None:
    edges = [e for e in package_imports(SRC) if (e.source, e.target) not in PACKAGE_EDGES_KNOWN]
    found = sorted(_show(c) for c in circles(edges))
    assert not found, "package circles (every import kind counts):\n" + "\n".join(found)


def test_every_known_package_import_still_closes_a_circle() -> None:
    edges = package_imports(SRC)
    pairs = {(e.source, e.target) for e in edges}
    around = circles(edges)
    stale = [
        pair
        for pair in PACKAGE_EDGES_KNOWN
        if pair not in pairs or not any(set(pair) <= c for c in around)
    ]
    assert not stale, (
        f"no longer closes a package circle; remove it from PACKAGE_EDGES_KNOWN: {stale}"
    )


def test_no_module_imports_from_a_layer_above_its_own_but_the_known_imports() -> None:
    found = [
        f"{e.source}:{e.line} ({_name(layer_of(e.source, LAYERS), LAYERS)}) imports "
        f"{e.target} ({_name(layer_of(e.target, LAYERS), LAYERS)})"
        for pair, e in sorted(upward(imports(SRC), LAYERS).items())
        if pair not in UPWARD_KNOWN
    ]
    assert not found, "imports from a layer above:\n" + "\n".join(found)


def test_every_known_upward_import_still_reaches_a_layer_above() -> None:
    stale = sorted(UPWARD_KNOWN - set(upward(imports(SRC), LAYERS)))
    assert not stale, f"no longer an upward import; remove it from UPWARD_KNOWN: {stale}"


def test_the_layers_name_only_modules_that_exist() -> None:
    known = modules(SRC)
    missing = [
        name
        for names in (*(n for _, n in LAYERS), SURFACES)
        for name in names
        if name.removesuffix(".*") not in known
    ]
    assert not missing, missing


def test_the_surfaces_hold_every_extension_command_and_page_module_and_nothing_else() -> None:
    declared = {m for ext in builtins() for m in (ext.cli, ext.pages) if m is not None}
    known = modules(SRC)
    assert declared <= set(known)
    assert {m for m in known if _named(m, SURFACES)} == declared | {
        name.removesuffix(".*") for name in SURFACES
    }


# --- the checks, on small packages ---------------------------------------------------------


def _package(root: Path, files: Mapping[str, str]) -> Path:
    package = root / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return package


def test_the_circle_check_finds_a_circle_closed_by_type_checking_and_local_imports(
    tmp_path: Path,
) -> None:
    package = _package(
        tmp_path,
        {
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
            "b.py": "def f():\n    from . import c\n",
            "c.py": "import pkg.a\n",
            "d.py": "from .a import x\n",
        },
    )
    assert circles(imports(package)) == {frozenset({"pkg.a", "pkg.b", "pkg.c"})}


def test_the_circle_check_finds_none_in_a_tree(tmp_path: Path) -> None:
    package = _package(
        tmp_path, {"a.py": "from . import b\n", "b.py": "from .sub import c\n", "sub/c.py": ""}
    )
    assert circles(imports(package)) == set()


def test_the_package_check_finds_a_circle_no_two_modules_close(tmp_path: Path) -> None:
    # a.x -> b.y -> a.z: no module circle, but a and b import each other.
    package = _package(
        tmp_path,
        {
            "a/__init__.py": "",
            "a/x.py": "from ..b import y\n",
            "a/z.py": "",
            "b/__init__.py": "",
            "b/y.py": "def f():\n    from ..a import z\n",
            "c.py": "from .a import x\n",
        },
    )
    assert circles(imports(package)) == set()
    assert circles(package_imports(package)) == {frozenset({"pkg.a", "pkg.b"})}


def test_the_package_check_counts_no_import_into_or_out_of_an_enclosing_package(
    tmp_path: Path,
) -> None:
    package = _package(
        tmp_path,
        {
            "a/__init__.py": "from .sub import y\n",
            "a/sub/__init__.py": "",
            "a/sub/y.py": "from ...a import x\nfrom ... import top\n",
            "a/x.py": "",
            "top.py": "from .a.sub import y\n",
        },
    )
    assert {(e.source, e.target) for e in package_imports(package)} == {
        ("pkg.a.sub", "pkg.top"),
        ("pkg.top", "pkg.a.sub"),
    }
    assert circles(package_imports(package)) == {frozenset({"pkg.a.sub", "pkg.top"})}


def test_the_layer_check_finds_an_import_from_a_layer_above(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "low.py": "import json\n\ndef f():\n    from .mid.x import y\n",
            "mid/__init__.py": "",
            "mid/x.py": "from ..low import f\n",
            "high.py": "from .mid import x\nfrom . import low\n",
        },
    )
    layers = (("low", ("pkg.low",)), ("mid", ("pkg.mid.*",)))
    found = upward(imports(package), layers)
    assert list(found) == [("pkg.low", "pkg.mid.x")]
    assert found["pkg.low", "pkg.mid.x"].line == 4
