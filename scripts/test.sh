#!/usr/bin/env bash
# Set up .venv (first run) and run everything CI runs: format check, lint, types, tests.
#
#   ./scripts/test.sh              everything, in parallel test processes (pytest-xdist)
#   ./scripts/test.sh --fast       the edit loop: no multi-process, chaos, browser, long
#                                  random state-machine or heavy tests
#   ./scripts/test.sh --serial     one test process (for a debugger, or to compare)
#   ./scripts/test.sh tests/x.py   any other arguments go to pytest as they are
#
# CAIRNQ_TEST_PROCESSES sets how many test processes run (default: 2 per CPU, at least 2).
# The multi-process, chaos and browser tests run in lanes of their own (tests/conftest.py),
# one test at a time per lane, so a loaded machine does not squeeze their timing windows.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# uv installs what pip would (the same resolution) in a fraction of the time; pip alone
# when uv cannot be had.
if ! { .venv/bin/python -m uv --version >/dev/null 2>&1 || .venv/bin/python -m pip install --quiet uv; } \
    || ! .venv/bin/python -m uv pip install --quiet --python .venv/bin/python -e ".[dev]"; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[dev]"
fi
# Byte-code for the package, the tests and their dependencies, written once here: the
# tests start hundreds of Python processes (workers, CLI runs, chaos programs), and where
# PYTHONDONTWRITEBYTECODE is set (or uv installed without compiling) each would otherwise
# compile every module it imports from source.
site_packages=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
.venv/bin/python -m compileall -q -j 0 src tests "$site_packages" >/dev/null 2>&1 || true
.venv/bin/ruff format --check src tests
.venv/bin/ruff check src tests
# mypy runs beside pytest (it needs no database); its report and verdict come at the end.
mypy_report=$(mktemp)
trap 'rm -f "$mypy_report"' EXIT
.venv/bin/mypy >"$mypy_report" 2>&1 &
mypy_pid=$!

cpus=$(.venv/bin/python -c "import os; print(len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1)")
processes=${CAIRNQ_TEST_PROCESSES:-$((cpus * 2 > 2 ? cpus * 2 : 2))}
args=()
parallel=1
for arg in "$@"; do
    case "$arg" in
        --fast) args+=(-m "not slow and not chaos and not browser and not long and not heavy") ;;
        --serial) parallel=0 ;;
        *) args+=("$arg") ;;
    esac
done
if [ "$parallel" = 1 ]; then
    args=(-n "$processes" --dist loadgroup "${args[@]}")
fi
status=0
.venv/bin/pytest "${args[@]}" || status=$?
if wait "$mypy_pid"; then
    echo "mypy: $(tail -n 1 "$mypy_report")"
else
    cat "$mypy_report"
    status=1
fi
exit "$status"
