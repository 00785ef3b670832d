"""Durable acceptance on SQLite across a power loss (docs/guarantees.md).

A shim (``powerloss_shim.c``, ``LD_PRELOAD``) models a disk with a volatile write
cache under the database's directory; a cut SIGKILLs every process, then the files
after power returns are each durable image plus a seeded random subset of the
unsynced writes (at most one torn at 512-byte sectors). See ``powerloss.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .powerloss import (
    DB_NAME,
    SECTOR,
    Cut,
    Disk,
    ShimUnavailable,
    compile_shim,
    crash_image,
    make_template,
    power_cut,
)

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

WAL = f"{DB_NAME}-wal"


@pytest.fixture(scope="session")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return compile_shim(tmp_path_factory.mktemp("powerloss-shim"))
    except ShimUnavailable as exc:
        if os.environ.get("CAIRNQ_REQUIRE_POSTGRES"):
            pytest.fail(f"{exc} (CAIRNQ_REQUIRE_POSTGRES is set: everything must run)")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("powerloss-template") / DB_NAME
    make_template(path)
    return path


Show = Callable[[Cut], None]


@pytest.fixture
def show(capsys: pytest.CaptureFixture[str]) -> Show:
    """Print a cut's summary in the test output, captured or not."""

    def emit(cut: Cut) -> None:
        with capsys.disabled():
            print(f"\n{cut.summary()}")

    return emit


# --- the shim itself -------------------------------------------------------------------

# Synced: "A" over [0, 4096) by pwrite + fsync, "D" over [4096, 4196) by write +
# fdatasync. Then, never synced: "B" over [0, 4096) by pwrite, "C" at 8192 by write.
# The "-shm" file is written and synced too: it never reaches the image. The
# directory is fsynced as SQLite does after creating a file: that passes through.
WRITER = """
import os, sys, time
path = sys.argv[1]
folder = os.open(os.path.dirname(path), os.O_RDONLY)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(fd, b"A" * 4096, 0)
os.fsync(fd)
os.lseek(fd, 4096, os.SEEK_SET)
os.write(fd, b"D" * 100)
os.fdatasync(fd)
os.pwrite(fd, b"B" * 4096, 0)
os.lseek(fd, 8192, os.SEEK_SET)
os.write(fd, b"C" * 100)
shm = os.open(path + "-shm", os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(shm, b"S" * 10, 0)
os.fsync(shm)
os.fsync(folder)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture(scope="module")
def written(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> Disk:
    """A disk after ``WRITER`` ran under the shim and was killed (SIGKILL)."""
    disk = Disk.create(tmp_path_factory.mktemp("powerloss-writer"), shim)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(disk.root / "f")],
        env={**os.environ, **disk.env()},
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.kill()
    proc.wait()
    proc.stdout.close()
    return disk


def test_a_synced_write_survives_the_cut_and_an_unsynced_one_the_cut_drops_is_lost(
    written: Disk, tmp_path: Path
) -> None:
    files = crash_image(written, tmp_path, random.Random(1), keep=0.0)
    assert (tmp_path / "f").read_bytes() == b"A" * 4096 + b"D" * 100
    assert files["f"].unsynced == 2 and files["f"].kept == 0
    # The running process saw its unsynced writes (the OS page cache).
    assert (written.root / "f").read_bytes()[:1] == b"B"


def test_an_unsynced_write_the_cut_keeps_is_in_the_image(written: Disk, tmp_path: Path) -> None:
    crash_image(written, tmp_path, random.Random(1), keep=1.0, tear=False)
    assert (tmp_path / "f").read_bytes() == (
        b"B" * 4096 + b"D" * 100 + bytes(8192 - 4196) + b"C" * 100
    )


def test_a_torn_write_lands_in_whole_512_byte_sectors_some_old_some_new(
    written: Disk, tmp_path: Path
) -> None:
    files = crash_image(written, tmp_path, random.Random(3), keep=1.0, tear=True)
    assert files["f"].torn
    head = (tmp_path / "f").read_bytes()[:4096]
    sectors = {head[i : i + SECTOR] for i in range(0, 4096, SECTOR)}
    assert sectors == {b"A" * SECTOR, b"B" * SECTOR}


def test_a_cut_inside_an_fsync_finishes_that_fsync(written: Disk, tmp_path: Path) -> None:
    disk = Disk(tmp_path / "disk", tmp_path / "cache", written.shim)
    shutil.copytree(written.root, disk.root)
    shutil.copytree(written.cache, disk.cache)
    (disk.cache / "f.replay").touch()  # what a kill between its two steps leaves
    files = crash_image(disk, tmp_path / "image", random.Random(1), keep=0.0)
    assert files["f"].completed_sync and files["f"].kept == 2
    assert (tmp_path / "image" / "f").read_bytes() == (
        b"B" * 4096 + b"D" * 100 + bytes(8192 - 4196) + b"C" * 100
    )


def test_the_shared_memory_file_is_not_in_the_crash_image(written: Disk, tmp_path: Path) -> None:
    crash_image(written, tmp_path, random.Random(1))
    assert (written.root / "f-shm").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


# --- SQLite under cairnq ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "mode"),
    [
        (1, "random"),
        (2, "random"),
        (3, "random"),
        (5, "checkpoint"),
        (6, "checkpoint"),
        (7, "checkpoint"),
    ],
)
def test_every_acknowledged_submit_survives_a_power_cut_with_synchronous_full(
    template: Path, shim: Path, tmp_path: Path, show: Show, seed: int, mode: str
) -> None:
    cut = power_cut(template, tmp_path, shim, seed=seed, synchronous="full", mode=mode)
    show(cut)
    assert cut.acked, cut.summary()
    assert cut.verdict.integrity == "ok", cut.summary()
    assert cut.verdict.missing == [], cut.summary()
    assert cut.verdict.cairnq_missing == [], cut.summary()
    # Every commit synced the WAL, and a checkpoint wrote the database file.
    assert cut.counts.fsyncs[WAL] >= len(cut.acked)
    assert cut.counts.writes[DB_NAME] > 0
    if mode == "random":
        assert cut.counts.checkpoints >= 1


@pytest.mark.parametrize(("seed", "mode"), [(11, "random"), (12, "random"), (13, "checkpoint")])
def test_a_power_cut_with_synchronous_normal_loses_at_most_the_last_commits(
    template: Path, shim: Path, tmp_path: Path, show: Show, seed: int, mode: str
) -> None:
    cut = power_cut(template, tmp_path, shim, seed=seed, synchronous="normal", mode=mode)
    show(cut)
    assert cut.acked, cut.summary()
    assert cut.verdict.integrity == "ok", cut.summary()
    assert cut.verdict.cairnq_missing == cut.verdict.missing
    assert cut.lost_only_the_last(), cut.summary()
    # Commits are not synced, only checkpoints are.
    assert cut.counts.fsyncs[WAL] < len(cut.acked)


@pytest.mark.parametrize(("seed", "mode"), [(21, "random"), (22, "checkpoint")])
def test_a_build_that_never_fsyncs_loses_acknowledged_submits_or_the_file_and_the_check_reports_it(
    template: Path, shim: Path, tmp_path: Path, show: Show, seed: int, mode: str
) -> None:
    cut = power_cut(
        template, tmp_path, shim, seed=seed, synchronous="full", mode=mode, mutant="synchronous_off"
    )
    show(cut)
    assert cut.counts.fsyncs[WAL] == 0 and cut.counts.fsyncs[DB_NAME] == 0
    assert cut.acked
    # Unsynced pages cut at random lose acknowledged rows, or tear the file itself (the
    # integrity check fails) with every row still readable: the check reports either.
    caught = bool(cut.verdict.missing) or cut.verdict.integrity != "ok"
    assert caught, f"the mutant went unnoticed: {cut.summary()}"
