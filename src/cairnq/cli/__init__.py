"""The ``cairnq`` command. Each command is a function of (arguments, output stream).

The database comes from ``--db URL``, else ``CAIRNQ_DATABASE_URL``, else
``./cairnq.db``; on PostgreSQL the schema from ``--schema``, else
``CAIRNQ_SCHEMA``. Only ``migrate``, ``worker`` and ``demo`` create or
migrate a database; every other command first checks, without writing, that
the database exists and holds cairnq's tables.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any, NoReturn, TextIO

from ..durations import parse_duration, parse_milliseconds
from ..errors import CairnQError, InvalidArgument
from ..extensions import Extension
from ..models import CONFLICTS, STATUSES, TERMINAL_STATUSES
from ..top import Section
from . import _extensions
from ._dashboard import DASHBOARD_PORT, cmd_dashboard, is_loopback
from ._errors import CommandError, one_line
from ._parts import add_get_options, add_ls_options, add_stats_options, cli_modules
from ._samples import cmd_conformance, cmd_demo
from ._schema import cmd_migrate
from ._style import paint
from ._target import (
    DEFAULT_DB,
    Target,
    inspect_database,
    open_client,
    require_cairnq,
    resolve_target,
)
from ._tasks import (
    PURGE_BATCH,
    cmd_cancel,
    cmd_get,
    cmd_ls,
    cmd_purge,
    cmd_retry,
    cmd_stats,
    cmd_submit,
    cmd_top,
)
from ._worker import cmd_worker, load_worker

TopSection = Section
"""What an extension's ``top_section`` gives ``cairnq top`` (``cairnq.top.Section``)."""

__all__ = [
    "CommandError",
    "Target",
    "TopSection",
    "console",
    "inspect_database",
    "is_loopback",
    "load_worker",
    "main",
    "open_client",
    "require_cairnq",
    "resolve_target",
]


class _Help(argparse.HelpFormatter):
    """Wraps descriptions as usual, but keeps an ``example:`` epilog on one line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example: "):
            return indent + text
        return super()._fill_text(text, width, indent)


NEGATIVE_VALUE = re.compile(r"^-(\d+(\.\d*)?|\.\d+)([a-z]+(\d+(\.\d*)?[a-z]+)*)?$")
"""A negative number or duration: ``-5``, ``-0.5``, ``-5m``, ``-1h30m``."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``cairnq: error: ...`` and exit code 2.

    A word that reads as a negative number or duration (``-5``, ``-5m``, ``-1h30m``,
    ``-0.5s``) is a value, not an option: ``--every -5m`` reaches ``--every``'s
    check, which says what is wrong with it. No option of cairnq looks like one.
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self._negative_number_matcher = NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"cairnq: error: {message} (see `{self.prog} --help`)\n")


def _duration(text: str) -> int:
    try:
        return parse_duration(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _milliseconds(text: str) -> int:
    try:
        return parse_milliseconds(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def version() -> str:
    """The installed cairnq's version (the package metadata, else ``cairnq.__version__``)."""
    try:
        return metadata.version("cairnq")
    except metadata.PackageNotFoundError:
        import cairnq

        return str(getattr(cairnq, "__version__", "unknown"))


def _count(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
        return value

    return parse


def _port(text: str) -> int:
    value: int = _count(1)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return value


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 86400 seconds")
    return value


def _common() -> _Parser:
    common = _Parser(add_help=False)
    _database_options(common, default=argparse.SUPPRESS)
    _extensions.add_option(common, default=argparse.SUPPRESS)
    return common


def _database_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    # The same options before and after the command name; SUPPRESS keeps a command's
    # parser from overwriting what was given before it.
    parser.add_argument(
        "--db",
        metavar="URL",
        default=default,
        help="sqlite:///path.db, a file path, or postgresql://user@host/db "
        f"(default: $CAIRNQ_DATABASE_URL, else ./{DEFAULT_DB})",
    )
    parser.add_argument(
        "--schema",
        default=default,
        help="PostgreSQL schema of cairnq's tables (default: $CAIRNQ_SCHEMA)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if default is None else default,
        help="show tracebacks on errors",
    )


def _by_id_or_key(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="task id")
    which.add_argument("--key", help="the idempotency key pointing at the task")


def _by_ids_or_keys(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="task ids")
    parser.add_argument(
        "--key",
        dest="keys",
        action="append",
        default=[],
        metavar="KEY",
        help="an idempotency key pointing at a task (repeatable)",
    )


def _parser(extras: Sequence[Extension] = ()) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cairnq",
        description="A durable task runtime on SQLite and PostgreSQL.",
        epilog="example: cairnq --db sqlite:///tasks.db ls --status failed",
        formatter_class=_Help,
    )
    _database_options(parser, default=None)
    _extensions.add_option(parser, default=None)
    parser.set_defaults(extensions=list(extras))
    parser.add_argument("--version", action="version", version=f"cairnq {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = [_common()]

    def command(
        name: str, summary: str, example: str, description: str = ""
    ) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=summary,
            description=description or summary[0].upper() + summary[1:] + ".",
            epilog=f"example: {example}",
            parents=common,
            formatter_class=_Help,
        )

    migrate_cmd = command(
        "migrate",
        "create the database or bring it to the current schema",
        "cairnq migrate --db postgresql://app@db/app --schema jobs",
        "Apply pending migrations (creating a SQLite file if needed). A database whose "
        "ledger records migrations whose objects are missing is refused unless --repair "
        "is given. --dry-run and --status only read.",
    )
    mode = migrate_cmd.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print what would be applied")
    mode.add_argument(
        "--status", action="store_true", help="list applied, damaged and pending migrations"
    )
    migrate_cmd.add_argument(
        "--repair",
        action="store_true",
        help="when the ledger records migrations whose tables, indexes or triggers are "
        "missing, apply the earliest of them and every later one again",
    )
    migrate_cmd.set_defaults(run=cmd_migrate)

    worker = command(
        "worker",
        "run a Worker from your code until SIGINT or SIGTERM",
        "cairnq worker app.tasks:worker --queues emails,default --concurrency 8",
        "Import MODULE:ATTR or FILE.py:ATTR (a cairnq Worker; ATTR defaults to `worker`) "
        "from the current directory or sys.path, or the file's own directory, and serve "
        "it. The first signal drains in-flight tasks; a second stops at once (the same "
        "signal again within 1 s counts once). The database is the Worker's own unless "
        "--db or --schema is given, or else $CAIRNQ_DATABASE_URL: then a Worker built "
        "from a URL or path serves that database instead (a Worker given an open client "
        "refuses --db, and says so when only the variable names another database).",
    )
    worker.add_argument(
        "target", metavar="MODULE:ATTR", help="where the Worker is (or path/to/file.py:ATTR)"
    )
    worker.add_argument("--queues", help="comma-separated queues, instead of the Worker's")
    worker.add_argument("--concurrency", type=_count(1), help="handler calls at once")
    worker.add_argument(
        "--until-idle",
        action="store_true",
        help="exit once no task is due and none runs (a batch run; delayed tasks stay queued)",
    )
    worker.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level of cairnq's loggers when nothing configured logging (info)",
    )
    worker.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="log lines on stderr when nothing configured logging: text, or one JSON "
        "object per line (text)",
    )
    worker.set_defaults(run=cmd_worker)

    submit = command(
        "submit",
        "enqueue a task",
        """cairnq submit email.send '{"to": "ada@example.com"}' --key welcome:ada --wait""",
        "Enqueue a task and print its id and status; warn on stderr when no live "
        "cairnq worker serves its name on its queue. With --wait, also wait for it to "
        "finish (up to 60 s unless --timeout-ms) and print the outcome; exits 1 unless "
        "it succeeded, 130 on Ctrl-C (the task stays queued).",
    )
    submit.add_argument("name", help="task (handler) name")
    submit.add_argument("payload", nargs="?", metavar="PAYLOAD_JSON", help="JSON; - reads stdin")
    submit.add_argument("--key", help="idempotency key")
    submit.add_argument(
        "--conflict",
        choices=CONFLICTS,
        default="reuse",
        help="when the key's task exists: "
        "reuse (default): return it if queued or running, else submit anew (runs again); "
        "reuse-succeeded: return it if queued, running or succeeded, else submit anew; "
        "reject: fail with AlreadyExists whatever its status; "
        "replace: cancel it if queued or running, then submit anew",
    )
    submit.add_argument("--queue", help="queue (default)")
    submit.add_argument("--priority", type=int, help="higher runs first (0)")
    delay = submit.add_mutually_exclusive_group()
    delay.add_argument(
        "--delay",
        dest="delay_ms",
        type=_duration,
        default=0,
        metavar="DURATION",
        help="earliest start, from now: 30s, 5m, 1h30m (none)",
    )
    delay.add_argument(
        "--delay-ms",
        dest="delay_ms",
        type=_milliseconds,
        metavar="MS",
        help="the same in milliseconds, or a duration",
    )
    submit.add_argument("--max-attempts", type=_count(1), help="runs allowed (3)")
    submit.add_argument("--wait", action="store_true", help="wait until the task finishes")
    timeout = submit.add_mutually_exclusive_group()
    timeout.add_argument(
        "--timeout",
        dest="timeout_ms",
        type=_duration,
        metavar="DURATION",
        help="with --wait: give up after this long: 30s, 5m (1m)",
    )
    timeout.add_argument(
        "--timeout-ms",
        dest="timeout_ms",
        type=_milliseconds,
        metavar="MS",
        help="the same in milliseconds, or a duration",
    )
    submit.add_argument(
        "--no-warn-unserved",
        action="store_true",
        help="do not warn when no live cairnq worker serves the task (workers of other "
        "SDKs do not announce themselves)",
    )
    submit.add_argument("--json", action="store_true", help="print the whole task as JSON")
    submit.set_defaults(run=cmd_submit)

    get = command("get", "print a task as JSON", "cairnq get --key welcome:ada")
    _by_id_or_key(get)
    add_get_options(get, extras)
    get.set_defaults(run=cmd_get)

    ls = command(
        "ls", "list tasks, newest first", "cairnq ls --status failed --queue emails --limit 20"
    )
    ls.add_argument("--status", choices=STATUSES)
    ls.add_argument("--queue")
    ls.add_argument("--name", help="task name")
    ls.add_argument("--limit", type=_count(0), default=100, help="most tasks listed (100)")
    add_ls_options(ls, extras)
    form = ls.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print a JSON array")
    form.add_argument("--jsonl", action="store_true", help="print one JSON object per line")
    ls.set_defaults(run=cmd_ls)

    cancel = command(
        "cancel",
        "cancel tasks (a running one stops cooperatively)",
        "cairnq cancel task_01JD0000000000000000000000 --key welcome:ada",
        "Cancel each task given by id or --key, printing one line per task. A task "
        "already canceled is reported and left alone; an unknown or finished task is an "
        "error for that task. Exits 1 if any task could not be canceled.",
    )
    _by_ids_or_keys(cancel)
    cancel.set_defaults(run=cmd_cancel)

    retry = command(
        "retry",
        "queue failed or canceled tasks again",
        "cairnq retry --key welcome:ada --reset-attempt",
        "Queue each failed or canceled task given by id or --key again, printing one line "
        "per task. A task already queued is reported and left alone; an unknown, running "
        "or succeeded task is an error for that task. Exits 1 if any task could not be retried.",
    )
    _by_ids_or_keys(retry)
    retry.add_argument("--reset-attempt", action="store_true", help="start counting at 0 again")
    retry.add_argument(
        "--from-step",
        metavar="NAME",
        help="replay: run the task again from this recorded durable step (docs/replay.md)",
    )
    retry.set_defaults(run=cmd_retry)

    purge = command(
        "purge",
        "delete finished tasks older than a duration",
        "cairnq purge --older-than 7d --status succeeded",
        "Delete finished (succeeded, failed, canceled) tasks completed longer ago than "
        "--older-than, in batches until none is left; print how many. It first prints how "
        "many tasks match, by status, and asks for confirmation on a terminal; without "
        "one it refuses unless --yes is given. --dry-run only counts.",
    )
    purge.add_argument(
        "--older-than",
        type=_duration,
        required=True,
        metavar="DURATION",
        help="7d, 12h, 30m, 45s, 500ms, or combined: 1h30m",
    )
    purge.add_argument("--status", choices=sorted(TERMINAL_STATUSES))
    purge.add_argument("--queue")
    purge.add_argument("--name", help="task name")
    purge.add_argument(
        "--batch", type=_count(1), default=PURGE_BATCH, help=f"rows per transaction ({PURGE_BATCH})"
    )
    confirm = purge.add_mutually_exclusive_group()
    confirm.add_argument(
        "--dry-run", action="store_true", help="print how many tasks match; delete nothing"
    )
    confirm.add_argument(
        "-y", "--yes", action="store_true", help="delete without asking for confirmation"
    )
    purge.set_defaults(run=cmd_purge)

    stats = command(
        "stats",
        "count tasks by queue and status",
        "cairnq stats --by name --since 7d",
        "The tasks of each queue by status; the extensions' options print something "
        "else instead (--by: the trends per task name or queue, docs/trends.md).",
    )
    stats.add_argument("--queue")
    add_stats_options(stats, extras)
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(run=cmd_stats)

    top = command(
        "top",
        "live view of queues and running tasks",
        "cairnq top --interval 1 --queue emails",
        "Refresh until q (or Ctrl-C): per queue the task counts by status, queued "
        "tasks split into due (QUEUED), not yet due (SCHEDULED) and waiting on an event, a "
        "sleep or other tasks (WAITING), and the tasks "
        "finished per second since the last refresh; due tasks no live cairnq worker "
        "serves, one line per name and queue; what the extensions add (a line under "
        "the header, a section under the queues); then the running tasks with id, "
        "progress, message, worker and age.",
    )
    top.add_argument("--interval", type=_interval, default=2.0, help="seconds between refreshes")
    top.add_argument("--queue", help="show only this queue")
    top.add_argument("-n", "--iterations", type=_count(1), help="stop after this many refreshes")
    top.set_defaults(run=cmd_top)

    for module in cli_modules(extras):
        adder = getattr(module, "add_commands", None)
        if adder is not None:
            adder(command, common, _Help, _count)

    dashboard = command(
        "dashboard",
        "serve the web dashboard: queues, tasks, workers, actions",
        "cairnq dashboard --db postgresql://app@db/app --host 0.0.0.0 --token $TOKEN",
        "Serve the dashboard (needs the dashboard extra: uvicorn). It binds to "
        "127.0.0.1 unless told otherwise; any other address needs a token "
        "(--token or CAIRNQ_DASHBOARD_TOKEN), which every request must then carry: "
        "open the page once with ?token=..., or send Authorization: Bearer.",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    dashboard.add_argument(
        "--port", type=_port, default=DASHBOARD_PORT, help=f"port ({DASHBOARD_PORT})"
    )
    dashboard.add_argument(
        "--read-only",
        action="store_true",
        help="hide and refuse cancel, retry, purge, pause and resume",
    )
    dashboard.add_argument(
        "--token", help="access token required on every request (default: $CAIRNQ_DASHBOARD_TOKEN)"
    )
    dashboard.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="comma-separated addresses or networks of reverse proxies whose X-Forwarded-Host "
        "and X-Forwarded-Proto to believe, or '*' (default: none)",
    )
    dashboard.set_defaults(run=cmd_dashboard)

    demo = commands.add_parser(
        "demo",
        help="run sample tasks through a worker on a local SQLite file",
        description="Submit sample tasks, run a worker on them with live progress, "
        "and print a summary. Exits 0 when every task succeeded.",
        epilog="example: cairnq demo --path /tmp/demo.db",
    )
    demo.add_argument("--path", default="cairnq-demo.db", help="SQLite file (cairnq-demo.db)")
    demo.set_defaults(run=cmd_demo)

    conformance = commands.add_parser(
        "conformance",
        help="run protocol scenario files against a backend",
        description="Run conformance scenarios (JSON). Each scenario gets a fresh store: a "
        "temporary SQLite file, or a throwaway schema in the PostgreSQL database given.",
        epilog="example: cairnq conformance scenarios/ --db postgresql://localhost/test "
        "--via store",
    )
    conformance.add_argument("paths", nargs="+", help="scenario files or directories")
    conformance.add_argument(
        "--db", default=argparse.SUPPRESS, help="database URL (picks the backend)"
    )
    conformance.add_argument(
        "--real-clock", action="store_true", help="really sleep in sleep steps"
    )
    conformance.add_argument(
        "--via",
        choices=("client", "store", "ops"),
        default="client",
        help="the layer steps go through: the client's methods, with cq.store for the "
        "worker's side (default); the store layer (TaskStore methods); or the protocol "
        "operations under both",
    )
    conformance.set_defaults(run=cmd_conformance)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code.

    Errors print one line to stderr (a traceback only with ``--debug``).
    """
    out = out or sys.stdout
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        extras = _extensions.loaded(argv)
    except (CommandError, CairnQError) as exc:
        sys.stderr.write(f"{paint('cairnq: error:', 'error', sys.stderr)} {one_line(exc)}\n")
        return exc.code if isinstance(exc, CommandError) else 1
    parser = _parser(extras)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command is None:
        # A bare `cairnq` asks what there is: the full help, and the usage-error code.
        out.write(parser.format_help())
        return 2
    try:
        code: int = args.run(args, out)
    except (CommandError, CairnQError, OSError, ImportError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"{paint('cairnq: error:', 'error', sys.stderr)} {one_line(exc)}\n")
        return exc.code if isinstance(exc, CommandError) else 1
    except KeyboardInterrupt:
        return 130
    return code


def console() -> None:  # pragma: no cover - the installed script
    sys.exit(main())
