"""The blocking code is generated from its async source: the checked-in files are up to date."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

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
