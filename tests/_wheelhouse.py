"""Wheels rebuilt from the test environment's installed packages, to install offline.

``build(folder, requirements)`` writes a wheel of this source tree's ``cairnq`` and
one of every installed distribution that the requirements need (their dependencies
followed through their markers), so that ``pip install --no-index --find-links
folder REQUIREMENTS`` installs exactly those into a fresh virtual environment
with no network. A wheel is the installed files of its distribution as its
``RECORD`` lists them (scripts outside site-packages are left out: pip writes
console scripts again from ``entry_points.txt``), with its ``METADATA`` and
``WHEEL``, and a new ``RECORD``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write(path: Path, entries: dict[str, bytes], dist_info: str) -> None:
    record = [_record_line(name, data) for name, data in entries.items()]
    record.append(f"{dist_info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")


def _wheel_name(name: str, version: str, tag: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}-{tag}.whl"


def _cairnq_wheel(folder: Path) -> None:
    """This source tree's package, with the installed (editable) metadata."""
    dist = importlib.metadata.distribution("cairnq")
    version = dist.version
    dist_info = f"cairnq-{version}.dist-info"
    entries: dict[str, bytes] = {}
    for path in sorted((ROOT / "src" / "cairnq").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            entries[path.relative_to(ROOT / "src").as_posix()] = path.read_bytes()
    entries[f"{dist_info}/METADATA"] = (dist.read_text("METADATA") or "").encode()
    entries[f"{dist_info}/entry_points.txt"] = (dist.read_text("entry_points.txt") or "").encode()
    entries[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: cairnq-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    _write(folder / _wheel_name("cairnq", version, "py3-none-any"), entries, dist_info)


def _installed_wheel(dist: importlib.metadata.Distribution, folder: Path) -> None:
    """An installed distribution's files, as a wheel."""
    wheel_text = dist.read_text("WHEEL") or ""
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")
    ]
    assert tags, f"{dist.metadata['Name']} has no WHEEL tag; it was not installed from a wheel"
    entries: dict[str, bytes] = {}
    dist_info = ""
    for file in dist.files or []:
        name = file.as_posix()
        parts = Path(name).parts
        if name.startswith("..") or "__pycache__" in parts or name.endswith(".pyc"):
            continue
        if parts[0].endswith(".dist-info"):
            dist_info = parts[0]
            if parts[-1] in SKIPPED:
                continue
        located = Path(str(file.locate()))
        if located.is_file():
            entries[name] = located.read_bytes()
    assert dist_info, f"{dist.metadata['Name']} lists no .dist-info folder"
    name = dist.metadata["Name"]
    _write(folder / _wheel_name(name, dist.version, tags[0]), entries, dist_info)


def build(folder: Path, requirements: list[str]) -> list[str]:
    """Wheels for ``requirements`` and everything they need, in ``folder``; their names."""
    folder.mkdir(parents=True, exist_ok=True)
    built: set[str] = set()
    followed: set[tuple[str, tuple[str, ...]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        key, extras = _canonical(requirement.name), tuple(sorted(requirement.extras))
        if (key, extras) in followed:
            continue
        followed.add((key, extras))
        dist = importlib.metadata.distribution(requirement.name)
        if key not in built:
            built.add(key)
            if key == "cairnq":
                _cairnq_wheel(folder)
            else:
                _installed_wheel(dist, folder)
        for text in dist.requires or []:
            needed = Requirement(text)
            marker = needed.marker
            if marker is None or any(
                marker.evaluate({**default_environment(), "extra": extra})
                for extra in ("", *extras)
            ):
                needed.marker = None
                todo.append(needed)
    return sorted(p.name for p in folder.glob("*.whl"))
