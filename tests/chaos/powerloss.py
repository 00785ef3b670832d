"""A simulated power cut for SQLite: a write-cache disk model, crash images, a checker.

``powerloss_shim.c`` (an ``LD_PRELOAD`` library) keeps, for the files of one
directory, a durable image (the content as of the last fsync) and a log of the
writes made since. A cut SIGKILLs every process, then ``crash_image`` builds the
files the machine would find after power returns: each durable image plus a
seeded random subset of its unsynced writes, applied in order, at most one of them
torn at 512-byte sectors. ``check_image`` opens the result with plain ``sqlite3``
(``integrity_check``) and with cairnq, and lists the acknowledged submits missing.

The processes a cut runs: ``python -m tests.chaos.powerloss submit CONFIG`` (submits
in a loop and appends each acknowledged id to its own file outside the simulated
disk) and ``... work CONFIG`` (a real worker, whose claims and settlements add
write and checkpoint traffic). CONFIG is JSON; ``mutant`` names a broken build.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = Path(__file__).with_name("powerloss_shim.c")
DB_NAME = "cairnq.db"
SECTOR = 512
_RECORD = struct.Struct("<IIQQ")
_WRITE, _TRUNCATE = 1, 2


class ShimUnavailable(Exception):
    """The shim cannot be built here (no C compiler)."""


def compile_shim(folder: Path) -> Path:
    """Build the shim into ``folder``; raises ``ShimUnavailable`` without gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ShimUnavailable("gcc is not installed; the power-loss shim cannot be built")
    target = folder / "powerloss_shim.so"
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-format-truncation"]
    done = subprocess.run(
        [gcc, *flags, "-o", str(target), str(SHIM_SOURCE), "-ldl", "-lpthread"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"compiling {SHIM_SOURCE.name} failed:\n{done.stderr}")
    return target


@dataclass
class Disk:
    """A simulated disk: files in ``root``, the model's state in ``cache`` (outside it)."""

    root: Path
    cache: Path
    shim: Path

    @classmethod
    def create(cls, folder: Path, shim: Path) -> Disk:
        root, cache = folder / "disk", folder / "cache"
        root.mkdir(parents=True)
        cache.mkdir(parents=True)
        return cls(root, cache, shim)

    def env(self, freeze: str | None = None) -> dict[str, str]:
        """Environment for a process whose writes under ``root`` go through the model."""
        env = {
            "LD_PRELOAD": str(self.shim),
            "POWERLOSS_DIR": str(self.root),
            "POWERLOSS_STATE": str(self.cache),
        }
        if freeze:
            env["POWERLOSS_FREEZE"] = freeze
        return env

    def events(self) -> list[str]:
        path = self.cache / "events.log"
        return path.read_text().splitlines() if path.exists() else []


@dataclass
class Record:
    kind: int
    offset: int
    data: bytes = b""


def read_log(path: Path) -> list[Record]:
    """The unsynced writes and truncates of one file, in the order the OS saw them."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    out: list[Record] = []
    at = 0
    while at + _RECORD.size <= len(raw):
        kind, _, offset, length = _RECORD.unpack_from(raw, at)
        at += _RECORD.size
        if at + length > len(raw):
            break  # a record cut short by the kill: the shim's call never returned
        out.append(Record(kind, offset, raw[at : at + length]))
        at += length
    return out


def _apply(image: bytearray, record: Record, sectors: set[int] | None = None) -> None:
    if record.kind == _TRUNCATE:
        del image[record.offset :]
        image.extend(bytes(max(0, record.offset - len(image))))
        return
    end = record.offset + len(record.data)
    if len(image) < end:
        image.extend(bytes(end - len(image)))
    if sectors is None:
        image[record.offset : end] = record.data
        return
    for sector in sectors:
        low = max(record.offset, sector * SECTOR)
        high = min(end, (sector + 1) * SECTOR)
        image[low:high] = record.data[low - record.offset : high - record.offset]


def _sectors(record: Record) -> list[int]:
    if record.kind != _WRITE or not record.data:
        return []
    return list(
        range(record.offset // SECTOR, (record.offset + len(record.data) - 1) // SECTOR + 1)
    )


@dataclass
class FileCrash:
    """What the cut did to one file."""

    unsynced: int = 0
    kept: int = 0
    torn: bool = False
    completed_sync: bool = False


def crash_image(
    disk: Disk,
    out: Path,
    rng: random.Random,
    *,
    keep: float | None = None,
    tear: bool | None = None,
) -> dict[str, FileCrash]:
    """Write into ``out`` the files as found after power returns.

    Per file, each unsynced write reaches the platter with probability ``keep``
    (drawn per file unless given), and with probability one half (``tear`` forces
    it either way) one kept write that spans several sectors lands torn: a random
    part of its sectors new, the rest old. A file the model never saw written is
    copied as it is (it was durable before the processes started). The ``-shm``
    wal-index is shared memory and is not there.
    """
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, FileCrash] = {}
    for real in sorted(disk.root.iterdir()):
        name = real.name
        if not real.is_file() or name.endswith("-shm"):
            continue
        durable = disk.cache / f"{name}.durable"
        if not durable.exists():
            shutil.copyfile(real, out / name)
            continue
        image = bytearray(durable.read_bytes())
        records = read_log(disk.cache / f"{name}.log")
        crash = report[name] = FileCrash(unsynced=len(records))
        if (disk.cache / f"{name}.replay").exists():
            # Killed inside an fsync: everything it was moving had been issued before it,
            # so finishing that fsync is one of the states the disk may be in.
            for record in records:
                _apply(image, record)
            crash.completed_sync = True
            crash.kept = len(records)
        else:
            chance = rng.random() if keep is None else keep
            kept = [r for r in records if rng.random() < chance]
            tearable = [i for i, r in enumerate(kept) if len(_sectors(r)) > 1]
            torn_now = rng.random() < 0.5 if tear is None else tear
            torn = rng.choice(tearable) if tearable and torn_now else None
            for index, record in enumerate(kept):
                if index == torn:
                    sectors = _sectors(record)
                    part = set(rng.sample(sectors, rng.randrange(1, len(sectors))))
                    _apply(image, record, part)
                    crash.torn = True
                else:
                    _apply(image, record)
            crash.kept = len(kept)
        (out / name).write_bytes(bytes(image))
    return report


@dataclass
class Counts:
    """What the processes did to the disk before the cut, from the shim's events."""

    writes: Counter[str] = field(default_factory=Counter)
    fsyncs: Counter[str] = field(default_factory=Counter)
    truncates: Counter[str] = field(default_factory=Counter)
    wal_headers: int = 0

    @classmethod
    def of(cls, disk: Disk) -> Counts:
        counts = cls()
        for line in disk.events():
            parts = line.split(" ")
            kind, name = parts[0], parts[1]
            if kind == "W":
                counts.writes[name] += 1
                if name == f"{DB_NAME}-wal" and parts[2] == "0":
                    counts.wal_headers += 1
            elif kind == "F":
                counts.fsyncs[name] += 1
            elif kind == "T":
                counts.truncates[name] += 1
        return counts

    @property
    def wal_restarts(self) -> int:
        """After a complete checkpoint the next writer starts the WAL over (a new header)."""
        return max(0, self.wal_headers - 1)

    @property
    def checkpoints(self) -> int:
        """Checkpoint runs that reached their end: each syncs the database file once.

        A run that cannot backfill the whole WAL (a reader holds it) leaves it long,
        so the next commit runs another: there are more runs than WAL restarts.
        """
        return self.fsyncs[DB_NAME]


@dataclass
class Verdict:
    """The crash image as seen by plain SQLite and by cairnq."""

    integrity: str
    acked: int
    missing: list[str]
    rows: int
    cairnq_missing: list[str] | None = None

    @property
    def consistent(self) -> bool:
        return self.integrity == "ok"


def check_image(path: Path, acked: list[str]) -> Verdict:
    """Open ``path`` cold, check it, and list the acknowledged ids it lacks."""
    try:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            rows = conn.execute("pragma integrity_check").fetchall()
            integrity = "ok" if rows == [("ok",)] else "; ".join(str(r[0]) for r in rows)
            present = {row[0] for row in conn.execute("select id from cairnq_tasks")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return Verdict(f"unreadable: {exc}", len(acked), list(acked), 0)
    verdict = Verdict(integrity, len(acked), [t for t in acked if t not in present], len(present))
    if verdict.consistent:
        from cairnq import SyncCairnQ

        with SyncCairnQ.sqlite(path, migrate=False) as client:
            verdict.cairnq_missing = [t for t in acked if client.get(t) is None]
    return verdict


def read_acks(folder: Path) -> list[list[str]]:
    """Per submitter, the ids it saw acknowledged, in order (whole lines only)."""
    streams: list[list[str]] = []
    for path in sorted(folder.glob("acks-*.txt")):
        lines = path.read_text().split("\n")
        streams.append([line for line in lines[:-1] if line])
    return streams


@dataclass
class Cut:
    """One power cut: what ran, what the disk saw, and what survived."""

    seed: int
    synchronous: str
    mode: str
    mutant: str | None
    streams: list[list[str]]
    counts: Counts
    files: dict[str, FileCrash]
    verdict: Verdict
    seconds: float

    @property
    def acked(self) -> list[str]:
        return [task for stream in self.streams for task in stream]

    def lost_only_the_last(self) -> bool:
        """Each submitter's lost acknowledgements are its last ones (a prefix survived)."""
        missing = set(self.verdict.missing)
        for stream in self.streams:
            lost = [task in missing for task in stream]
            if lost != sorted(lost):
                return False
        return True

    def summary(self) -> str:
        wal = f"{DB_NAME}-wal"
        files = ", ".join(
            f"{name}: kept {f.kept}/{f.unsynced} unsynced"
            + (" (one torn)" if f.torn else "")
            + (" (fsync in flight completed)" if f.completed_sync else "")
            for name, f in self.files.items()
        )
        return (
            f"power cut seed={self.seed} synchronous={self.synchronous} at={self.mode}"
            + (f" mutant={self.mutant}" if self.mutant else "")
            + ": "
            f"{len(self.acked)} acknowledged, {len(self.verdict.missing)} lost, "
            f"{self.verdict.rows} tasks in the image, integrity {self.verdict.integrity[:120]!r}; "
            f"WAL fsyncs {self.counts.fsyncs[wal]}, checkpoint runs (database fsyncs) "
            f"{self.counts.checkpoints}, WAL restarts {self.counts.wal_restarts}, "
            f"database page writes {self.counts.writes[DB_NAME]}; {files}; "
            f"{self.seconds:.1f}s"
        )


def make_template(path: Path) -> None:
    """A migrated, cleanly closed database: what exists before the power-on."""
    from cairnq import SyncCairnQ

    with SyncCairnQ.sqlite(path) as client:
        client.stats()


def _spawn(
    role: str, config: dict[str, Any], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.powerloss", role, json.dumps(config)],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _wait_for(
    what: str,
    ready: Callable[[], bool],
    procs: list[subprocess.Popen[bytes]],
    folder: Path,
    limit_s: float,
) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        for proc in procs:
            if proc.poll() is not None:
                logs = "\n".join(p.read_text()[-2000:] for p in sorted(folder.glob("*.err")))
                raise RuntimeError(f"a process exited ({proc.returncode}) before {what}:\n{logs}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {limit_s} s")
        time.sleep(0.01)


def power_cut(
    template: Path,
    folder: Path,
    shim: Path,
    *,
    seed: int,
    synchronous: str = "full",
    mode: str = "random",
    mutant: str | None = None,
    submitters: int = 2,
) -> Cut:
    """Run submitters and a worker on a copy of ``template``, cut the power, check.

    ``mode="random"``: the cut comes at a seeded random instant after the first
    checkpoint. ``mode="checkpoint"``: the process that makes the K-th write to the
    database file (counted over all processes, K seeded) freezes there, inside a
    checkpoint, and the cut comes then.
    """
    started = time.monotonic()
    rng = random.Random(seed)
    disk = Disk.create(folder, shim)
    shutil.copyfile(template, disk.root / DB_NAME)
    # About 70 database writes per checkpoint here: K up to 200 lands in the first
    # few, some after a WAL restart.
    freeze = f"{DB_NAME}:{rng.randint(1, 200)}" if mode == "checkpoint" else None
    env = disk.env(freeze)
    db = str(disk.root / DB_NAME)
    procs = [
        _spawn(
            "work",
            {"db": db, "synchronous": synchronous, "mutant": mutant},
            env,
            folder / "work.err",
        )
    ]
    for index in range(submitters):
        config = {
            "db": db,
            "synchronous": synchronous,
            "mutant": mutant,
            "acks": str(folder / f"acks-{index}.txt"),
            "seed": seed * 100 + index,
        }
        procs.append(_spawn("submit", config, env, folder / f"submit-{index}.err"))
    events = disk.cache / "events.log"

    def seen(marker: bytes) -> bool:
        return events.exists() and marker in events.read_bytes()

    try:
        if mode == "checkpoint":
            _wait_for("a freeze inside a checkpoint", lambda: seen(b"\nS "), procs, folder, 30)
        else:
            # A checkpoint begins with a write to the database file and ends with its
            # fsync; a build that never syncs gets the cut 2 s after the beginning.
            _wait_for("a checkpoint", lambda: seen(f"\nW {DB_NAME} ".encode()), procs, folder, 30)
            synced = f"\nF {DB_NAME}\n".encode()
            with contextlib.suppress(TimeoutError):
                _wait_for("a synced checkpoint", lambda: seen(synced), procs, folder, 2)
            time.sleep(rng.uniform(0.0, 0.8))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
    streams = read_acks(folder)
    files = crash_image(disk, folder / "image", rng)
    verdict = check_image(folder / "image" / DB_NAME, [t for s in streams for t in s])
    return Cut(
        seed,
        synchronous,
        mode,
        mutant,
        streams,
        Counts.of(disk),
        files,
        verdict,
        time.monotonic() - started,
    )


# --- the processes of a cut ----------------------------------------------------------


def _apply_mutant(name: str | None) -> None:
    """Deliberately broken builds the power-loss check must catch."""
    if not name:
        return
    from cairnq.backends import SQLiteBackend

    if name == "synchronous_off":
        # Commits and checkpoints that never fsync (SQLite's synchronous=OFF, which
        # cairnq refuses): an acknowledged submit is only in the OS cache.
        connect = SQLiteBackend._connect

        def _connect(self: SQLiteBackend, *, writer: bool) -> sqlite3.Connection:
            conn = connect(self, writer=writer)
            if writer:
                conn.execute("pragma synchronous = off")
            return conn

        SQLiteBackend._connect = _connect  # type: ignore[method-assign]
        return
    raise SystemExit(f"unknown mutant {name!r}")


def _submit(config: dict[str, Any]) -> None:
    from cairnq import SyncCairnQ

    rng = random.Random(config["seed"])
    fd = os.open(config["acks"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with SyncCairnQ.sqlite(config["db"], synchronous=config["synchronous"]) as client:
        n = 0
        while True:
            # Payloads of varied size: writes that span a varied number of sectors.
            task = client.submit("job", {"n": n, "pad": "x" * rng.randrange(0, 3000)})
            # One write per ack: a kill cannot leave half a line behind.
            os.write(fd, f"{task.id}\n".encode())
            n += 1


def _work(config: dict[str, Any]) -> None:
    from cairnq import TaskContext, Worker

    worker = Worker.sqlite(
        config["db"],
        synchronous=config["synchronous"],
        concurrency=4,
        poll_interval_ms=20,
    )

    @worker.task
    async def job(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {"n": payload["n"]}

    worker.serve()


def main(argv: list[str]) -> None:
    role, raw = argv
    config = json.loads(raw)
    _apply_mutant(config.get("mutant"))
    {"submit": _submit, "work": _work}[role](config)


if __name__ == "__main__":
    main(sys.argv[1:])
