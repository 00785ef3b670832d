"""The README's set-up command works as written, from a copy of the source tree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _readme_command(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if lines and lines[0].startswith("#") and marker in lines[0]:
            return lines[1]
    raise AssertionError(f"no README command block marked {marker!r}")


def test_the_readme_names_the_test_command() -> None:
    assert _readme_command("run the tests") == "./scripts/test.sh"


def test_the_readme_set_up_command_installs_and_runs_the_demo(tmp_path: Path) -> None:
    command = _readme_command("set up")
    assert "pip install ." in command
    assert "cairnq demo" in command
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not files:
        pytest.fail("the README test needs a git checkout to copy the source tree from")
    clone = tmp_path / "clone"
    for name in files:
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    command = command.replace("python3 ", f"{sys.executable} ", 1)
    done = subprocess.run(
        command, shell=True, cwd=clone, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "summary: 8/8 succeeded" in done.stdout
    assert (clone / "cairnq-demo.db").exists()
