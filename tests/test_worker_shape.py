"""The worker's shape: ``Worker.run`` and ``Worker.__init__`` stay short (their parts live
in components and helpers), and the worker's modules import each other without a circle."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cairnq.worker
from cairnq.worker import Worker

MAX_LINES = 60
WORKER_PACKAGE = Path(cairnq.worker.__file__).parent


def too_long(fn: Callable[..., Any], limit: int = MAX_LINES) -> str | None:
    """Why ``fn`` is too long (its source, signature and docstring included), or ``None``."""
    lines = len(inspect.getsource(fn).splitlines())
    if lines < limit:
        return None
    return f"{fn.__qualname__} has {lines} lines; it must stay under {limit}"


def import_edges(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, every kind of import counted
    (at the top, under ``TYPE_CHECKING``, inside a function)."""
    modules = {path.stem for path in package.glob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                found.update(name for name in names if name in modules)
        edges[path.stem] = found
    return edges


def circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, a]``), or ``None``."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(edges.get(module, ())):
            found = visit(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(edges):
        found = visit(module, [])
        if found:
            return found
    return None


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worker_run_is_under_60_lines() -> None:
    assert too_long(Worker.run) is None


def test_worker_init_is_under_60_lines() -> None:
    assert too_long(Worker.__init__) is None


def test_the_length_check_fails_a_function_of_60_lines(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(58))
    source = tmp_path / "long_function.py"
    source.write_text(f"def long():\n{body}\n    return x0\n")
    long = load(source, "long_function").long
    assert too_long(long) == "long has 60 lines; it must stay under 60"


def test_the_worker_modules_import_each_other_without_a_circle() -> None:
    edges = import_edges(WORKER_PACKAGE)
    assert {"_context", "_settling", "_executor", "_registry", "_lifecycle"} <= set(edges)
    assert circle(edges) is None


def test_the_circle_check_finds_a_circle_closed_under_type_checking(tmp_path: Path) -> None:
    (tmp_path / "_a.py").write_text("from ._b import B\n")
    (tmp_path / "_b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ._c import C\n"
    )
    (tmp_path / "_c.py").write_text("def f():\n    from . import _a\n")
    assert circle(import_edges(tmp_path)) == ["_a", "_b", "_c", "_a"]
