"""``import cairnq`` imports what every process needs, and a feature's models, operations
and worker parts (and the standard library modules only they use) when first used;
every name stays importable where it was, and a package's lazily exported names all
resolve."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import cairnq
from cairnq._lazy import exports

# Modules a process that imports cairnq (or builds a client and a worker) has no use
# for until it uses their feature.
NOT_ON_IMPORT = (
    "cairnq.client._blocking",
    "cairnq.client._sync",
    "cairnq.extensions._builtins_client_sync",
    "cairnq.extensions.batches._ops",
    "cairnq.extensions.history._trends",
    "cairnq.extensions.limits._component",
    "cairnq.extensions.policies._ops",
    "cairnq.extensions.presence._served",
    "cairnq.extensions.schedules._model",
    "cairnq.extensions.search._model",
    "cairnq.extensions.uniqueness._model",
    "cairnq.extensions.waits._ops",
    "cairnq.extensions.workflows._ops",
    "cairnq.flow",
    "cairnq.limits",
    "cairnq.schedules",
    "ctypes",
    "difflib",
    "importlib.resources",
    "multiprocessing",
    "secrets",
    "tempfile",
    "zoneinfo",
)

# The public submodules a plain ``import cairnq`` makes attributes of the package.
SUBMODULES = (
    "backends",
    "backoff",
    "backpressure",
    "client",
    "durations",
    "errors",
    "extensions",
    "flow",
    "history",
    "hooks",
    "kernel",
    "limits",
    "lineage",
    "models",
    "protocol",
    "schedules",
    "store",
    "worker",
)

# The packages whose names are exported lazily.
LAZY = (
    "cairnq",
    "cairnq.client",
    *(
        f"cairnq.extensions.{name}"
        for name in (
            "batches",
            "history",
            "limits",
            "pauses",
            "policies",
            "presence",
            "schedules",
            "search",
            "uniqueness",
            "waits",
            "workflows",
        )
    ),
)


def _run(program: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=120
    ).stdout


@pytest.fixture(scope="module")
def imported() -> set[str]:
    """The modules a fresh process holds after ``import cairnq``."""
    return set(json.loads(_run("import json, sys, cairnq; print(json.dumps(list(sys.modules)))")))


@pytest.mark.parametrize("module", NOT_ON_IMPORT)
def test_importing_cairnq_leaves_a_feature_s_module_unimported(
    imported: set[str], module: str
) -> None:
    assert "cairnq.worker" in imported
    assert module not in imported


def test_a_worker_that_ran_a_task_on_a_database_without_schedules_imports_no_unused_feature(
    tmp_path: Path,
) -> None:
    program = f"""
import asyncio, json, sys
from cairnq import CairnQ, Worker

async def main():
    async with CairnQ.sqlite({str(tmp_path / "t.db")!r}) as cq:
        worker = Worker(cq, poll_interval_ms=20)

        @worker.task
        async def add(ctx, payload):
            return payload["a"] + payload["b"]

        async with worker.background():
            assert await cq.call("add", {{"a": 1, "b": 2}}) == 3

asyncio.run(main())
print(json.dumps(list(sys.modules)))
"""
    loaded = set(json.loads(_run(program).splitlines()[-1]))
    unused = {
        "cairnq.client._blocking",
        "cairnq.extensions.schedules._model",
        "cairnq.extensions.search._model",
        "cairnq.extensions.uniqueness._model",
        "cairnq.extensions.waits._ops",
        "cairnq.extensions.presence._served",
        "multiprocessing",
        "zoneinfo",
    }
    assert "cairnq.extensions.limits._component" in loaded  # the worker's parts ran
    assert not unused & loaded


def test_the_submodules_import_cairnq_made_attributes_stay_attributes() -> None:
    program = (
        "import cairnq, types\n"
        f"for name in {SUBMODULES!r}:\n"
        "    assert isinstance(getattr(cairnq, name), types.ModuleType), name\n"
        "print('ok')\n"
    )
    assert _run(program).strip() == "ok"


def _type_checking_names(package: str) -> set[str]:
    """The names the ``if TYPE_CHECKING:`` imports of ``package``'s ``__init__`` bind:
    what type checkers read as its names."""
    path = importlib.util.find_spec(package).origin  # type: ignore[union-attr]
    tree = ast.parse(Path(str(path)).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom):
                    names |= {alias.asname or alias.name for alias in child.names}
    return names


@pytest.mark.parametrize("package", LAZY)
def test_every_name_a_package_lists_or_type_checks_resolves_in_a_fresh_process(
    package: str,
) -> None:
    checked = sorted(_type_checking_names(package))
    assert checked
    program = (
        f"import importlib\nmodule = importlib.import_module({package!r})\n"
        f"listed = set(dir(module)) | set(getattr(module, '__all__', ())) | set({checked!r})\n"
        "names = sorted(listed)\n"
        "missing = [n for n in names if not hasattr(module, n)]\n"
        "print(len(names), missing)\n"
    )
    count, missing = _run(program).split(" ", 1)
    assert int(count) > 0
    assert missing.strip() == "[]"


def test_a_lazily_exported_name_is_the_object_of_the_module_it_lives_in() -> None:
    from cairnq.extensions.schedules import _model

    assert cairnq.Schedule is _model.Schedule
    assert cairnq.schedules.Schedule is _model.Schedule


def test_the_blocking_client_is_cairnq_client_s_pickles_and_shows_its_source() -> None:
    from cairnq.client import SyncCairnQ

    assert cairnq.SyncCairnQ is SyncCairnQ
    assert pickle.loads(pickle.dumps(SyncCairnQ)) is SyncCairnQ
    assert "class SyncCairnQ" in inspect.getsource(SyncCairnQ)


def test_exports_sets_a_name_on_its_package_once_imported_and_refuses_an_unknown_one() -> None:
    package = ModuleType("cairnq_lazy_probe")
    sys.modules[package.__name__] = package
    try:
        getattr_, dir_ = exports(package.__name__, {"dumps": "json"})
        package.__getattr__ = getattr_  # type: ignore[attr-defined]
        assert "dumps" not in vars(package)
        assert package.dumps is json.dumps
        assert vars(package)["dumps"] is json.dumps
        assert "dumps" in dir_()
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            package.nothing  # noqa: B018
    finally:
        del sys.modules[package.__name__]
