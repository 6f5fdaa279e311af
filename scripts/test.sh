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

# `make test` passes --with-vm-image: the guest image builds in the background while the static steps
# and tests/backend run, and tests/fixtures/vm_image_build.py holds every other test until the build
# has ended (its log, pid and exit status are in test-results/vm-image/).
build=""
if [[ ${1:-} == --with-vm-image ]]; then
  shift
  build=$PWD/test-results/vm-image
  rm -rf "$build" && mkdir -p "$build"
  (
    started=$EPOCHREALTIME
    vm-images/build.sh > "$build/log" 2>&1 &
    echo $! > "$build/build.pid"
    wait $! && rc=0 || rc=$?
    awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' > "$build/seconds"
    echo "$rc" > "$build/rc"
  ) &
  echo $! > "$build/pid"
  export QOELAB_VM_IMAGE_BUILD=$build
  echo "==> the guest image builds in the background (log: test-results/vm-image/log)"
fi
finish() {  # a run that ends before any test waited for the build does not leave it running
  [[ -n $build && ! -e $build/rc ]] && kill "$(cat "$build/build.pid")" 2>/dev/null && wait 2>/dev/null
  return 0
}
trap finish EXIT

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
# The suite runs in two lanes (pytest-xdist; tests/fixtures/lanes.py keeps each file in one lane and
# every guest-booting file in one unit): on a fresh 2-core host that took 23.9 minutes against 36.9
# for one lane (docs/testing.md). QOELAB_TEST_LANES=1 runs it in one, in collection order.
lanes=${QOELAB_TEST_LANES:-2}
[[ $lanes =~ ^[1-8]$ ]] || { echo "QOELAB_TEST_LANES must be 1-8, got '$lanes'" >&2; exit 2; }
xdist=()
((lanes > 1)) && xdist=(-n "$lanes" --dist loadfile --no-loadscope-reorder)
# The slowest tests are listed at the end: the suite aims at 30 minutes, long runs go to benchmarks/.
status=0
.venv/bin/pytest -p no:cacheprovider "${xdist[@]}" --durations=30 --junitxml=test-results/junit.xml "$@" \
  || status=$?
if [[ -n $build && -e $build/seconds ]]; then
  printf 'guest image (built in the background)\t%s\n' "$(cat "$build/seconds")" >> test-results/steps.tsv
  for waited in "$build"/waited_s*; do  # one file per lane: waited_s.gw0, waited_s.gw1
    [[ -e $waited ]] || continue
    lane=${waited##*/waited_s}
    printf 'pytest waiting for the guest image%s\t%s\n' "${lane:+ (lane ${lane#.})}" "$(cat "$waited")" \
      >> test-results/steps.tsv
  done
fi
exit $status
