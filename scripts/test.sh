#!/usr/bin/env bash
# The test command behind `make test`: static checks, then pytest over tests/ against the real
# PostgreSQL/Redis in .state/env, real namespaces, a real Celery worker and Debian's Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
set -a; . .state/env; set +a
export QOELAB_DEBUG=${QOELAB_DEBUG:-true}
export PYTHONUNBUFFERED=1

# Each static step's seconds go to test-results/steps.tsv: scripts/test_profile.py adds them to
# pytest's junit file for the suite's profile (docs/testing.md).
mkdir -p test-results
: > test-results/steps.tsv
step() {  # step NAME: the time since the previous mark, under NAME (to 0.1 s)
  local now=$EPOCHREALTIME
  awk -v name="$1" -v a="$mark" -v b="$now" 'BEGIN { printf "%s\t%.1f\n", name, b - a }' >> test-results/steps.tsv
  mark=$now
}
mark=$EPOCHREALTIME

echo "==> ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --check . | head -20; exit 1; }
step "ruff (lint, format)"

echo "==> migrations are committed"
.venv/bin/python backend/manage.py makemigrations --check --dry-run >/dev/null \
  || { echo "models changed without a migration: run 'manage.py makemigrations' and commit it" >&2; exit 1; }
step "migrations committed"

echo "==> front-end unit tests (node)"
(cd frontend && npm test --silent)
step "front-end unit tests (node)"

echo "==> pytest"
[ $# -gt 0 ] || set -- tests
# The slowest tests are listed at the end: the suite aims at 30 minutes, long runs go to benchmarks/.
exec .venv/bin/pytest -p no:cacheprovider --durations=30 --junitxml=test-results/junit.xml "$@"
