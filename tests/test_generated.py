"""The blocking code is generated from its async source: the checked-in files are up to
date, and a handler's blocking context is all generated, a twin of each async method."""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from cairnq import SyncTaskContext, TaskContext
from cairnq.worker._blocking import BlockingContext

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_sync", ROOT / "scripts" / "generate_sync.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_file_matches_a_fresh_generation_from_its_async_source() -> None:
    problems = _generator().stale()
    assert problems == [], "\n\n".join(problems)


def _copy_pairs(generator: ModuleType, root: Path) -> None:
    for source, twin in generator.PAIRS.items():
        for name in (source, twin.target):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, root / name)


def test_the_check_names_a_generated_file_edited_by_hand(tmp_path: Path) -> None:
    generator = _generator()
    _copy_pairs(generator, tmp_path)
    edited = tmp_path / "src" / "cairnq" / "client" / "_sync.py"
    text = edited.read_text()
    edited.write_text(text.replace("return follow(", "return  follow(", 1))

    problems = generator.stale(tmp_path)

    assert len(problems) == 1
    assert problems[0].startswith(f"{edited} is out of date")
    assert "-        return  follow(procedure, self._run_step, sub)" in problems[0]
    assert "+        return follow(procedure, self._run_step, sub)" in problems[0]


def test_the_check_names_a_generated_file_that_is_missing(tmp_path: Path) -> None:
    generator = _generator()
    _copy_pairs(generator, tmp_path)
    missing = tmp_path / "src" / "cairnq" / "backends" / "_pg_sync.py"
    missing.unlink()

    problems = generator.stale(tmp_path)

    assert len(problems) == 1
    assert problems[0].startswith(f"{missing} is out of date")


def test_every_generated_file_starts_with_the_do_not_edit_header() -> None:
    generator = _generator()
    for source, twin in generator.PAIRS.items():
        first = (ROOT / twin.target).read_text().splitlines()[0]
        assert first == f"# generated from {source} by scripts/generate_sync.py; do not edit"


def test_every_async_source_of_the_package_has_a_generated_twin() -> None:
    generator = _generator()
    sources = {
        path.relative_to(ROOT).as_posix() for path in (ROOT / "src" / "cairnq").rglob("*_async.py")
    }
    assert sources == set(generator.PAIRS)


# --- the handler's blocking context ---------------------------------------------------------

# What ``TaskContext`` has that ``SyncTaskContext`` does not (``Blocking.skip``): the
# worker's own settle, and the settle whose write is an async function.
NOT_BLOCKING = {"succeed_encoded", "succeed_in", "complete_in"}


def _is_async(cls: type, name: str) -> bool:
    found = inspect.getattr_static(cls, name)
    if isinstance(found, functools.partialmethod):
        found = found.func
    return inspect.iscoroutinefunction(found)


def _methods(cls: type, *, below: type = object) -> dict[str, Any]:
    """The public methods of ``cls`` and of its bases that are not ``below``'s."""
    own = {n for k in cls.__mro__ if not issubclass(below, k) for n in vars(k)}
    return {
        name: getattr(cls, name)
        for name in own
        if not name.startswith("_")
        and not isinstance(inspect.getattr_static(cls, name), property)
        and callable(getattr(cls, name))
    }


def test_the_blocking_context_has_a_twin_of_every_public_async_method_of_the_async_one() -> None:
    blocking = _methods(SyncTaskContext, below=BlockingContext)
    twinned = {n for n in _methods(TaskContext) if _is_async(TaskContext, n)} - NOT_BLOCKING

    assert set(blocking) == twinned
    assert {"progress", "succeed", "fail", "submit", "snooze", "step", "spawn"} <= twinned
    assert not [n for n in blocking if _is_async(SyncTaskContext, n)]


def test_each_blocking_method_has_the_async_one_s_signature() -> None:
    for name, method in _methods(SyncTaskContext, below=BlockingContext).items():
        blocking = inspect.signature(method)
        original = inspect.signature(getattr(TaskContext, name))
        assert list(blocking.parameters.values())[1:] == list(original.parameters.values())[1:]
        assert blocking.return_annotation == original.return_annotation


def test_no_hand_written_module_holds_a_blocking_twin_of_a_context() -> None:
    hand_written = []
    for path in sorted((ROOT / "src" / "cairnq").rglob("*.py")):
        text = path.read_text()
        if text.startswith("# generated from "):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and re.fullmatch(r"Sync\w*Context", node.name):
                hand_written.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert hand_written == []


def test_the_context_sources_and_their_generated_blocking_twins() -> None:
    pairs = {source: twin.target for source, twin in _generator().PAIRS.items() if twin.blocking}
    assert pairs == {
        f"src/cairnq/{name}_async.py": f"src/cairnq/{name}_sync.py"
        for name in (
            "worker/_context",
            "extensions/_builtins_context",
            "extensions/snooze/_context",
            "extensions/steps/_context",
            "extensions/workflows/_context",
            "extensions/waits/_context",
            "extensions/logs/_context",
        )
    }


def test_the_check_names_a_blocking_twin_whose_async_source_gained_a_method(
    tmp_path: Path,
) -> None:
    generator = _generator()
    _copy_pairs(generator, tmp_path)
    source = tmp_path / "src" / "cairnq" / "extensions" / "snooze" / "_context_async.py"
    text = source.read_text()
    added = (
        "    async def nap(self: ContextHost) -> None:\n"
        '        """Doze."""\n\n'
        "    async def snooze(\n"
    )
    source.write_text(text.replace("    async def snooze(\n", added, 1))

    problems = generator.stale(tmp_path)

    twin = tmp_path / "src" / "cairnq" / "extensions" / "snooze" / "_context_sync.py"
    assert len(problems) == 1
    assert problems[0].startswith(f"{twin} is out of date")
    assert "+    def nap(self: SyncHost) -> None:" in problems[0]
    assert "+        return self._call(SnoozeContext.nap(self._inner))" in problems[0]
