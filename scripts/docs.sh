#!/usr/bin/env bash
# Build the documentation site into site/ (open site/index.html), in strict mode:
# a broken link or anchor, a page missing from mkdocs.yml's nav or a docstring the
# API reference cannot read fails the build. Sets up .venv with the `docs` extra first.
#
#   ./scripts/docs.sh          build into site/
#   ./scripts/docs.sh serve    preview at http://127.0.0.1:8000, rebuilt on every edit
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import mkdocs, material, mkdocstrings_handlers.python" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet -e ".[docs]"
fi
export NO_MKDOCS_2_WARNING=1
if [ "${1:-}" = "serve" ]; then
    exec .venv/bin/mkdocs serve
fi
exec .venv/bin/mkdocs build --strict
