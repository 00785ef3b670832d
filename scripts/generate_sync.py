"""Generate cairnq's blocking code from its async source, with unasync.

Each async module has a generated blocking twin, checked in; ``PAIRS`` lists them,
source -> target, so a twin may live in another folder than its source (the
client's beside its source in ``cairnq/client/``, the PostgreSQL backend's in
``cairnq/backends/``). After changing a source, run::

    python scripts/generate_sync.py           # rewrite every target
    python scripts/generate_sync.py --check   # exit 1, with a diff, when one is stale

``tests/test_generated.py`` runs the check, so a stale or hand-edited generated
file fails the tests.

unasync drops ``async``/``await`` and renames tokens (names, and strings that are
exactly a name) by the table below. Then the prose of docstrings is adjusted
(``await x`` -> ``x``, ``CairnQ`` -> ``SyncCairnQ``), the module docstring is
replaced, and ruff formats the result and sorts its imports.

A handler's blocking context is not unasync's: it runs each async method on the
worker's loop while the handler's thread waits. A source naming ``Blocking`` classes
(the contexts' ``_context_async.py``) gets, for each, a class ``Sync<name>`` whose
every public async method of the class has a blocking twin of the same signature and
docstring, ``return self._call(<name>.<method>(self._inner, ...))``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import NamedTuple

import unasync

ROOT = Path(__file__).resolve().parent.parent


class Blocking(NamedTuple):
    """A class of a source whose blocking twin, ``Sync<name>``, is generated.

    ``skip`` names public async methods left without a twin; ``base`` is the
    (module, class) the twin is built on before the twins of the class's bases;
    ``docstring`` replaces the class's own (adjusted as prose) when given.
    """

    name: str
    skip: tuple[str, ...] = ()
    base: tuple[str, str] | None = None
    docstring: str | None = None


class Twin(NamedTuple):
    """A generated module: where it is written, the docstring that replaces its source's,
    and, for a blocking context, the classes it twins (else unasync renders it)."""

    target: str
    docstring: str
    blocking: tuple[Blocking, ...] = ()


# Async source -> its generated twin, both relative to the repository's root.
PAIRS = {
    "src/cairnq/client/_async.py": Twin(
        "src/cairnq/client/_sync.py",
        "The client's operations, blocking: ``SyncCairnQ`` is built on them.",
    ),
    "src/cairnq/backends/_pg_async.py": Twin(
        "src/cairnq/backends/_pg_sync.py",
        "The PostgreSQL backend's blocking paths: ``PostgresBackend`` mixes them in.",
    ),
    "src/cairnq/kernel/_sweeper_async.py": Twin(
        "src/cairnq/kernel/_sweeper_sync.py",
        "The retention sweeper, blocking: ``SyncRetentionSweeper`` sweeps from a daemon thread.",
    ),
    "src/cairnq/extensions/_client_async.py": Twin(
        "src/cairnq/extensions/_client_sync.py",
        "What an extension's client code needs from the blocking client: ``ClientView``.",
    ),
    "src/cairnq/extensions/_builtins_client_async.py": Twin(
        "src/cairnq/extensions/_builtins_client_sync.py",
        "The built-in extensions' client parts, blocking: ``SyncCairnQ`` inherits them.",
    ),
    **{
        f"src/cairnq/extensions/{name}/_client_async.py": Twin(
            f"src/cairnq/extensions/{name}/_client_sync.py",
            f"The client's {title}, blocking: ``SyncCairnQ`` inherits its mixin.",
        )
        for name, title in (
            ("batches", "batches"),
            ("history", "attempt history"),
            ("limits", "limits"),
            ("pauses", "pauses"),
            ("policies", "task policies"),
            ("presence", "view of worker presence"),
            ("schedules", "schedules"),
            ("search", "search"),
            ("snooze", "snoozes"),
            ("steps", "durable steps"),
            ("uniqueness", "submits under uniqueness, debounce or throttle"),
            ("waits", "events"),
            ("workflows", "workflows"),
        )
    },
    "src/cairnq/worker/_context_async.py": Twin(
        "src/cairnq/worker/_context_sync.py",
        "What a plain ``def`` handler sees of its task: ``SyncTaskContext``.",
        (
            Blocking(
                "TaskContext",
                # The worker's own; and a write the handler gives as an async function.
                skip=("succeed_encoded", "succeed_in"),
                base=("._blocking", "BlockingContext"),
                docstring=(
                    "The context a plain ``def`` handler gets: the same API, with blocking "
                    "methods.\n\nThe handler runs in a thread; each method runs on the "
                    "worker's event loop and blocks\nthe handler's thread until it is done."
                ),
            ),
        ),
    ),
    "src/cairnq/extensions/_builtins_context_async.py": Twin(
        "src/cairnq/extensions/_builtins_context_sync.py",
        "The built-in extensions' context methods, blocking: ``SyncTaskContext`` inherits them.",
        (Blocking("BuiltinContext"),),
    ),
    **{
        f"src/cairnq/extensions/{name}/_context_async.py": Twin(
            f"src/cairnq/extensions/{name}/_context_sync.py",
            f"What {title} to a plain ``def`` handler's context, blocking.",
            (Blocking(mixin),),
        )
        for name, mixin, title in (
            ("snooze", "SnoozeContext", "snoozing adds"),
            ("steps", "StepsContext", "durable steps add"),
            ("workflows", "WorkflowsContext", "workflows add"),
            ("waits", "WaitsContext", "durable waits add"),
            ("logs", "LogsContext", "attempt logs add"),
        )
    },
}

# unasync's own table already maps __aenter__, __aexit__, __aiter__, __anext__,
# asynccontextmanager, AsyncIterator and friends, and AsyncX -> SyncX.
REPLACEMENTS = {
    # The client.
    "CairnQ": "SyncCairnQ",
    "afollow": "follow",
    "wait_async": "wait",
    "until_live_async": "until_live",
    "arun_on": "run_on",
    # The extensions' client parts, and the modules they import.
    "_client_async": "_client_sync",
    "_builtins_client_async": "_builtins_client_sync",
    # An outside extension's namespace class for each half (``Extension.namespace``).
    "namespace": "sync_namespace",
    # The backend, and the names of each half's own state and hooks.
    "aopen": "open",
    "aclose": "close",
    "arun": "run",
    "_arun_now": "_run_now",
    "_adrive_on": "_drive_on",
    "_arun_alone": "_run_alone",
    "_adrive_pipelined": "_drive_pipelined",
    "adrive": "drive",
    "arun_setup": "run_setup",
    "_abounded": "_bounded",
    "apausepoint_when_quiet": "pausepoint_when_quiet",
    "_async_connection": "_sync_connection",
    "_execute_async": "_execute_sync",
    "_configure_async": "_configure_sync",
    "_create_schema_async": "_create_schema_sync",
    "_async_source": "_sync_source",
    "_async_setup_guard": "_sync_setup_guard",
    "_async_conn_guard": "_sync_conn_guard",
    "_acheck_loop": "_check_loop",
    "_astart_listening": "_start_listening",
    "_aguard_pool": "_guard_pool",
    "ASYNC_POOL_NAME": "SYNC_POOL_NAME",
    "ASYNC_WRAPS_OTHER": "SYNC_WRAPS_OTHER",
    "ASYNC_NO_CONNECTION": "SYNC_NO_CONNECTION",
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "RetentionSweeper": "SyncRetentionSweeper",
}

# Prose in docstrings and comments, which unasync leaves alone.
PROSE = (
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\basync (with|for) "), r"\1 "),
    (re.compile(r"(?<![\w.])CairnQ\b"), "SyncCairnQ"),
    (re.compile(r"(?<![\w.])RetentionSweeper\b"), "SyncRetentionSweeper"),
    # The blocking half belongs to no event loop.
    (re.compile(r"\n *EventLoopMismatch: .*"), ""),
    # A section left empty by that.
    (re.compile(r"\n\n *Raises:\n(?= *\"\"\")"), "\n"),
)

# The names a blocking twin says instead of its source's: the twinned classes, and the
# type a mixin's ``self`` has (``extensions/_context.py``).
BLOCKING_NAMES = {
    "ContextHost": "SyncHost",
    **{spec.name: f"Sync{spec.name}" for twin in PAIRS.values() for spec in twin.blocking},
}

# The prose of a blocking twin's docstrings, beyond ``PROSE``.
BLOCKING_PROSE = (
    (re.compile(r"\basync def "), "def "),
    (re.compile(r"(?<![\w.])TaskContext\b"), "SyncTaskContext"),
    (re.compile(r"\ban async handler\b"), "a plain ``def`` handler"),
)

# ruff's line length (pyproject.toml).
LINE_LENGTH = 100

MODULE_DOCSTRING = re.compile(r'\A"""(?:.|\n)*?"""\n')


def header(source: str) -> str:
    """The first line of every generated file."""
    line = f"# generated from {source} by scripts/generate_sync.py; do not edit\n"
    # The header names its source in full, which a deep folder takes past the line length.
    return line + ("# ruff: noqa: E501\n" if len(line) > LINE_LENGTH + 1 else "")


def _ruff(args: list[str], text: str, target: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(ROOT / target), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruff {' '.join(args)} failed on the generated {target}: {done.stderr}")
    return done.stdout


def render(source: str, root: Path = ROOT) -> str:
    """The generated text of ``source``'s twin, from ``<root>/<source>``.

    unasync's rule works on a path fragment, so the source is rendered from a
    scratch ``_async/`` copy into a scratch ``_sync/``, wherever the pair lives.
    """
    twin = PAIRS[source]
    if twin.blocking:
        return render_blocking(source, root)
    with tempfile.TemporaryDirectory() as scratch:
        async_dir = Path(scratch) / "_async"
        async_dir.mkdir()
        shutil.copy(root / source, async_dir / "module.py")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(async_dir / "module.py")], [rule])
        text = (Path(scratch) / "_sync" / "module.py").read_text()
    for pattern, replacement in PROSE:
        text = pattern.sub(replacement, text)
    text = MODULE_DOCSTRING.sub(f'"""{twin.docstring}"""\n', text, count=1)
    text = _ruff(["check", "--fix", "--select", "I,F401", "--quiet"], text, twin.target)
    text = _ruff(["format", "--quiet"], text, twin.target)
    return header(source) + text


def _prose(text: str) -> str:
    for pattern, replacement in (*PROSE, *BLOCKING_PROSE):
        text = pattern.sub(replacement, text)
    return text


def _docstring(node: ast.AST, text: str) -> str | None:
    """The docstring literal opening ``node``'s body, as written (indented as the source)."""
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return ast.get_source_segment(text, first) if isinstance(first.value.value, str) else None
    return None


def _forwarded(args: ast.arguments) -> str:
    """The arguments that pass a method's parameters (but ``self``) on unchanged."""
    positional = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
    if args.vararg is not None:
        positional.append(f"*{args.vararg.arg}")
    keywords = [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    if args.kwarg is not None:
        keywords.append(f"**{args.kwarg.arg}")
    return ", ".join(["self._inner", *positional, *keywords])


def _as_written(node: ast.expr, text: str) -> ast.expr:
    """An expression that unparses to ``node``'s source text."""
    return ast.Name(id=ast.get_source_segment(text, node) or ast.unparse(node))


def _blocking_method(owner: str, method: ast.AsyncFunctionDef, text: str) -> str:
    """The blocking twin of ``owner.method``: the same signature, run on the loop."""
    if method.decorator_list:
        raise ValueError(f"{owner}.{method.name}: a decorated async method has no blocking twin")
    args = copy.deepcopy(method.args)
    # Defaults as written (``30_000``, not ``30000``).
    args.defaults = [_as_written(d, text) for d in args.defaults]
    args.kw_defaults = [None if d is None else _as_written(d, text) for d in args.kw_defaults]
    this = (*args.posonlyargs, *args.args)[0]
    if isinstance(this.annotation, ast.Name):
        this.annotation.id = BLOCKING_NAMES.get(this.annotation.id, this.annotation.id)
    returns = f" -> {ast.unparse(method.returns)}" if method.returns is not None else ""
    doc = _docstring(method, text)
    lines = [f"    def {method.name}({ast.unparse(args)}){returns}:"]
    if doc is not None:
        lines.append(f"        {_prose(doc)}")
    lines.append(f"        return self._call({owner}.{method.name}({_forwarded(method.args)}))")
    return "\n".join(lines)


def _blocking_class(node: ast.ClassDef, spec: Blocking, text: str) -> str:
    """The twin of the class ``node``: a blocking method for each public async one (but
    ``spec.skip``), and its aliases of them (``complete = succeed``)."""
    bases = [spec.base[1]] if spec.base else []
    for base in node.bases:
        if not isinstance(base, ast.Name) or base.id not in BLOCKING_NAMES:
            raise ValueError(f"{node.name}'s base {ast.unparse(base)} has no blocking twin")
        bases.append(BLOCKING_NAMES[base.id])
    methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    twinned = {
        n.name
        for n in node.body
        if isinstance(n, ast.AsyncFunctionDef)
        and not n.name.startswith("_")
        and n.name not in spec.skip
    }
    if spec.docstring is not None:
        doc = f'"""{textwrap.indent(spec.docstring, "    ").lstrip()}\n    """'
    else:
        doc = _prose(_docstring(node, text) or f'"""The blocking twin of ``{node.name}``."""')
    parts = [f"class Sync{node.name}({', '.join(bases)}):\n    {doc}"]
    for stmt in node.body:
        if isinstance(stmt, ast.AsyncFunctionDef) and stmt.name in twinned:
            parts.append(_blocking_method(node.name, stmt, text))
        elif isinstance(stmt, ast.Assign):
            named = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} & methods
            if named and named <= twinned:
                parts.append(f"    {ast.get_source_segment(text, stmt)}")
    return "\n\n".join(parts)


def _imports_of(tree: ast.Module) -> dict[str, tuple[str, bool]]:
    """Each name the module imports: the import statement of it alone, and whether it is
    imported only for type checking."""
    found: dict[str, tuple[str, bool]] = {}

    def visit(statements: list[ast.stmt], typing_only: bool) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.If) and ast.unparse(stmt.test) == "TYPE_CHECKING":
                visit(stmt.body, True)
            elif isinstance(stmt, ast.Import | ast.ImportFrom):
                for alias in stmt.names:
                    alone = copy.copy(stmt)
                    alone.names = [alias]
                    name = alias.asname or alias.name.split(".")[0]
                    found[name] = (ast.unparse(alone), typing_only)

    visit(tree.body, False)
    return found


def _twin_module(module: str) -> str:
    """Where a twin is that the source imports from ``module``."""
    return re.sub(r"_async$", "_sync", module)


def _blocking_imports(tree: ast.Module, source: str, twin: Twin, body: str) -> str:
    """The imports of the names ``body`` uses, from where ``source`` has them."""
    imported = _imports_of(tree)
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)} | {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    produced = ast.parse(body)
    local = {n.arg for n in ast.walk(produced) if isinstance(n, ast.arg)} | {
        n.name for n in ast.walk(produced) if isinstance(n, ast.ClassDef | ast.FunctionDef)
    }
    used = (
        {
            n.id
            for n in ast.walk(produced)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        - local
        - set(dir(builtins))
    )
    renamed = {new: old for old, new in BLOCKING_NAMES.items()}
    bases = {spec.base[1]: spec.base[0] for spec in twin.blocking if spec.base}
    lines: list[str] = []
    typing_only: list[str] = []
    for name in sorted(used):
        if name in bases:
            lines.append(f"from {bases[name]} import {name}")
        elif name in imported:
            statement, checking = imported[name]
            (typing_only if checking else lines).append(statement)
        elif name in renamed and renamed[name] in imported:
            statement, checking = imported[renamed[name]]
            found = ast.parse(statement).body[0]
            if not isinstance(found, ast.ImportFrom) or found.module is None:
                raise ValueError(f"{source}: {renamed[name]} is not imported from a module")
            module = "." * found.level + _twin_module(found.module)
            (typing_only if checking else lines).append(f"from {module} import {name}")
        elif name in defined:
            lines.append(f"from .{Path(source).stem} import {name}")
        else:
            raise ValueError(f"{source}: the blocking twin uses {name}, which it cannot import")
    if typing_only:
        lines.append("from typing import TYPE_CHECKING")
        lines.append("if TYPE_CHECKING:\n" + "\n".join(f"    {s}" for s in typing_only))
    return "\n".join(lines)


def render_blocking(source: str, root: Path = ROOT) -> str:
    """The generated text of the blocking twin of a context source, from ``<root>/<source>``."""
    twin = PAIRS[source]
    text = (root / source).read_text()
    tree = ast.parse(text)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    body = "\n\n\n".join(_blocking_class(classes[s.name], s, text) for s in twin.blocking)
    imports = _blocking_imports(tree, source, twin, body)
    text = (
        f'"""{twin.docstring}"""\n\nfrom __future__ import annotations\n\n{imports}\n\n\n{body}\n'
    )
    text = _ruff(["check", "--fix", "--select", "I,F401", "--quiet"], text, twin.target)
    text = _ruff(["format", "--quiet"], text, twin.target)
    return header(source) + text


def stale(root: Path = ROOT) -> list[str]:
    """Every generated file under ``root`` that differs from a fresh generation.

    Each entry names the file and shows a short diff (checked in -> generated).
    """
    problems = []
    for source, twin in PAIRS.items():
        fresh = render(source, root)
        path = root / twin.target
        current = path.read_text() if path.exists() else ""
        if current != fresh:
            diff = difflib.unified_diff(
                current.splitlines(),
                fresh.splitlines(),
                f"{path} (checked in)",
                f"{path} (generated)",
                lineterm="",
                n=1,
            )
            lines = list(diff)
            shown = "\n".join(lines[:30]) + ("\n..." if len(lines) > 30 else "")
            problems.append(f"{path} is out of date; regenerate it:\n{shown}")
    return problems


def main() -> int:
    """Write the generated files, or with ``--check`` only report stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report, do not write")
    args = parser.parse_args()
    if args.check:
        problems = stale()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for source, twin in PAIRS.items():
        path = ROOT / twin.target
        path.parent.mkdir(exist_ok=True)
        path.write_text(render(source))
        print(f"wrote {twin.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
