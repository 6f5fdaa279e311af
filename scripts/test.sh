#!/usr/bin/env bash
# The test command behind `make test`: static checks, then pytest over tests/ against the real
# PostgreSQL/Redis in .state/env, real namespaces, a real Celery worker and Debian's Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
set -a; . .state/env; set +a
export QOELAB_DEBUG=${QOELAB_DEBUG:-true}
export PYTHONUNBUFFERED=1

echo "==> ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --check . | head -20; exit 1; }

echo "==> migrations are committed"
.venv/bin/python backend/manage.py makemigrations --check --dry-run >/dev/null \
  || { echo "models changed without a migration: run 'manage.py makemigrations' and commit it" >&2; exit 1; }

echo "==> front-end unit tests (node)"
(cd frontend && npm test --silent)

echo "==> pytest"
mkdir -p test-results
[ $# -gt 0 ] || set -- tests
# The slowest tests are listed at the end: the suite aims at 30 minutes, long runs go to benchmarks/.
exec .venv/bin/pytest -p no:cacheprovider --durations=30 --junitxml=test-results/junit.xml "$@"
