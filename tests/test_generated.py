"""The blocking half is generated from the async half: the checked-in files are up to date."""

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


def test_the_check_names_a_generated_file_edited_by_hand(tmp_path: Path) -> None:
    generator = _generator()
    copy = tmp_path / "_sync"
    shutil.copytree(generator.SYNC_DIR, copy)
    edited = copy / "client.py"
    text = edited.read_text()
    edited.write_text(text.replace("return follow(", "return  follow(", 1))

    problems = generator.stale(copy)

    assert len(problems) == 1
    assert problems[0].startswith(f"{edited} is out of date")
    assert "-        return  follow(procedure, self._run_step, sub)" in problems[0]
    assert "+        return follow(procedure, self._run_step, sub)" in problems[0]


def test_every_generated_file_starts_with_the_do_not_edit_header() -> None:
    generator = _generator()
    for name in generator.MODULES:
        first = (generator.SYNC_DIR / name).read_text().splitlines()[0]
        assert first == (
            f"# generated from src/cairnq/_async/{name} by scripts/generate_sync.py; do not edit"
        )
