"""The SQLite backend's file system side: the paths and URLs that name a database file,
creating the file, what keeps this process from opening it, free space, and splitting a
migration script into statements."""

from __future__ import annotations

import os
import sqlite3
import stat

from ..errors import DatabaseUnavailable, InvalidArgument
from ._registry import registration

# Below this much free space the WAL, which grows by up to 1000 pages (4 MiB) between
# automatic checkpoints, could take what is left; the writer then checkpoints eagerly.
LOW_SPACE_BYTES = 16 * 1024 * 1024


def split_script(source: str) -> list[str]:
    """Split a migration file into statements (never ``executescript``: it COMMITs)."""
    out: list[str] = []
    pending = ""
    for line in source.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                out.append(pending)
            pending = ""
    if pending.strip() and any(
        ln.strip() and not ln.strip().startswith("--") for ln in pending.splitlines()
    ):
        out.append(pending)
    return out


def _file_path(path: str) -> str:
    """The file system path of a database named by a path or a ``file:`` URI."""
    if not path.startswith("file:"):
        return path
    import urllib.parse

    return urllib.parse.unquote(urllib.parse.urlsplit(path).path)


def _free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s file system."""
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except (OSError, AttributeError):
        return LOW_SPACE_BYTES
    return st.f_bavail * st.f_frsize


def _check_file_mode(mode: int | None) -> int | None:
    """``file_mode`` as given, once it is permission bits that let the owner read and write."""
    if mode is None:
        return None
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise InvalidArgument(f"file_mode must be permission bits such as 0o600, not {mode!r}")
    if mode & 0o600 != 0o600:
        raise InvalidArgument(
            f"file_mode {mode:#o} must let the owner read and write the file (0o600 at least)"
        )
    return mode


def _owner_and_mode(name: str) -> str:
    try:
        st = os.stat(name)
    except OSError:
        return ""
    return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}"


def _read_only_file_system(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _may(name: str, flag: int) -> bool:
    """``os.access`` for the effective user, the one the file system checks."""
    effective = os.access in os.supports_effective_ids
    return os.access(name, flag, effective_ids=effective)


def _permission_problem(path: str) -> str | None:
    """What keeps this process from opening the database at ``path``; None if nothing does.

    SQLite needs to enter the file's directory, to read and write the file and
    its ``-wal`` and ``-shm`` files, and to create those two in the directory
    when they are missing.
    """
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        return None
    user = f"this user (uid {os.geteuid()})" if hasattr(os, "geteuid") else "this user"
    if not _may(folder, os.X_OK):
        return f"permission denied: {user} cannot enter the directory {folder}"
    if _read_only_file_system(folder):
        return f"the file system holding {folder} is mounted read-only"
    names = [path, f"{path}-wal", f"{path}-shm"]
    for name in names:
        if not os.path.exists(name):
            continue
        lacking = [
            word for flag, word in ((os.R_OK, "read"), (os.W_OK, "write")) if not _may(name, flag)
        ]
        if lacking:
            return (
                f"permission denied: {user} cannot {' or '.join(lacking)} the file {name} "
                f"({_owner_and_mode(name)}; see the file_mode option for files shared by users)"
            )
    missing = [os.path.basename(name) for name in names if not os.path.exists(name)]
    if missing and not _may(folder, os.W_OK):
        return (
            f"permission denied: {user} cannot write in the directory {folder} "
            f"({_owner_and_mode(folder)}), where SQLite must create {', '.join(missing)}"
        )
    return None


def _create_file(path: str, mode: int | None) -> None:
    """Create the database file at ``path`` (absolute) unless it exists; never a directory.

    With ``mode`` the file gets exactly those bits, whatever the umask; with None,
    ``0o666`` less the umask. SQLite creates the ``-wal`` and ``-shm`` files with
    the database file's mode.

    Raises:
        DatabaseUnavailable: the directory is missing, or the file cannot be created.
    """
    if os.path.exists(path):
        return
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        what = "is not a directory" if os.path.exists(folder) else "does not exist"
        raise DatabaseUnavailable(
            f"cannot create SQLite database {path!r}: the directory {folder} {what}; "
            "cairnq creates no directories: create it first, or fix the path",
            retryable=False,
        )
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666 if mode is None else mode)
    except FileExistsError:
        return
    except PermissionError as exc:
        problem = _permission_problem(path) or f"permission denied ({exc.strerror})"
        raise DatabaseUnavailable(f"cannot create SQLite database {path!r}: {problem}") from exc
    except OSError as exc:
        raise DatabaseUnavailable(f"cannot create SQLite database {path!r}: {exc}") from exc
    try:
        if mode is not None:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def sqlite_path_from_url(url: str) -> str:
    """``sqlite:///relative.db`` -> ``relative.db``; ``sqlite:////abs/x.db`` -> ``/abs/x.db``.

    Raises:
        InvalidArgument: the URL has a host part (``sqlite://tasks.db``) or names no file.

    Example::

        sqlite_path_from_url("sqlite:////var/lib/app/q.db")   # "/var/lib/app/q.db"
    """
    rest = url[len("sqlite://") :]
    if not rest.startswith("/"):
        guess = rest.split("?", 1)[0]
        hint = f"did you mean sqlite:///{guess} (relative)? " if guess else ""
        raise InvalidArgument(
            f"malformed SQLite URL {url!r}: {hint}"
            "use sqlite:///relative/path.db or sqlite:////abs/path.db"
        )
    import urllib.parse

    path = urllib.parse.unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise InvalidArgument(f"SQLite URL {url!r} names no file")
    return path


def _check_sqlite_path(path: str) -> str:
    """``path`` unless it is a misspelt URL that would name an oddly named file.

    ``sqlite:tasks.db`` and ``sqlite:/tmp/x.db`` (no ``//``) are not URLs to
    SQLite: as file paths they would create a file named ``sqlite:tasks.db`` or
    a directory named ``sqlite:``. The same goes for the other registered URL
    schemes (``postgresql:db``). ``file:`` URIs and ``:memory:`` are paths.

    Raises:
        InvalidArgument: the path starts with a URL scheme and a colon, without ``//``.
    """
    prefix, colon, rest = path.partition(":")
    if not colon or "://" in path:
        return path
    if prefix.lower() == "sqlite":
        if rest.startswith("/"):
            spelled = rest.lstrip("/")
            hint = f"sqlite:////{spelled} (absolute) or sqlite:///{spelled} (relative)"
        elif rest:
            hint = f"sqlite:///{rest} (relative) or sqlite:////abs/path.db"
        else:
            hint = "sqlite:///relative/path.db or sqlite:////abs/path.db"
        raise InvalidArgument(f"malformed SQLite URL {path!r}: did you mean {hint}?")
    if len(prefix) > 1 and prefix.lower() != "file" and registration(prefix.lower()) is not None:
        raise InvalidArgument(
            f"malformed database URL {path!r}: did you mean {prefix}://{rest.lstrip('/')}?"
        )
    return path


def _path(url: str) -> str:
    """The file a ``sqlite://`` URL or a path names (``location`` of the registration)."""
    if url[: len("sqlite://")].lower() == "sqlite://":
        return sqlite_path_from_url(url)
    return _check_sqlite_path(url)
