#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer. Use DATABASE_URL / REDIS_URL (or the local defaults) when
# they answer; otherwise start a private PostgreSQL cluster and Redis under .state/ (git-ignored).
# Writes the URLs in use to .state/env, which the Makefile sources.
#   scripts/services.sh up | down | status
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STATE=$ROOT/.state
mkdir -p "$STATE"
PRIVATE_PG_PORT=${QOELAB_PRIVATE_PG_PORT:-54329}
PRIVATE_REDIS_PORT=${QOELAB_PRIVATE_REDIS_PORT:-63799}
DEFAULT_DB=postgres://postgres@127.0.0.1:5432/qoelab
DEFAULT_REDIS=redis://127.0.0.1:6379/0

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# The server part of a database URL with the maintenance database, to test and to CREATE DATABASE.
maint_url() { echo "${1%/*}/postgres"; }
db_name() { local n=${1##*/}; echo "${n%%\?*}"; }

pg_answers() { psql "$(maint_url "$1")" -Atqc 'select 1' >/dev/null 2>&1; }
redis_answers() { redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }

ensure_database() {
  local url=$1 name
  name=$(db_name "$url")
  if ! psql "$(maint_url "$url")" -Atqc "select 1 from pg_database where datname='$name'" | grep -q 1; then
    psql "$(maint_url "$url")" -qc "create database \"$name\"" >/dev/null
    echo "==> created database $name"
  fi
}

start_private_pg() {
  local bin data
  bin=$(pg_bin)
  [ -n "$bin" ] || { echo "PostgreSQL is not installed; install the Debian package 'postgresql'" >&2; exit 1; }
  data=$STATE/postgres
  # The server runs as the 'postgres' user, which must reach the data folder; a checkout under a
  # private home (e.g. /root) is not reachable, so the cluster then lives in /var/tmp, linked here.
  if ! su postgres -s /bin/sh -c "test -x '$STATE'" 2>/dev/null; then
    local real=/var/tmp/qoelab-$(echo "$ROOT" | sha256sum | cut -c1-12)/postgres
    mkdir -p "$real"; [ -L "$data" ] || { rm -rf "$data"; ln -s "$real" "$data"; }
    data=$real
  fi
  mkdir -p "$data"; chown postgres: "$data"; chmod 700 "$data"
  if [ ! -f "$data/PG_VERSION" ]; then
    echo "==> initialising a private PostgreSQL cluster in $data"
    su postgres -s /bin/sh -c "'$bin/initdb' -D '$data' -U postgres --auth=trust -E UTF8 >/dev/null"
  fi
  echo "==> starting private PostgreSQL on 127.0.0.1:$PRIVATE_PG_PORT"
  su postgres -s /bin/sh -c "'$bin/pg_ctl' -D '$data' -l '$data/server.log' -w -t 60 \
      -o '-p $PRIVATE_PG_PORT -k /tmp -c listen_addresses=127.0.0.1' start >/dev/null"
}

start_private_redis() {
  command -v redis-server >/dev/null || { echo "Redis is not installed; install the Debian package 'redis-server'" >&2; exit 1; }
  mkdir -p "$STATE/redis"
  echo "==> starting private Redis on 127.0.0.1:$PRIVATE_REDIS_PORT"
  redis-server --port "$PRIVATE_REDIS_PORT" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
    --dir "$STATE/redis" --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/redis/redis.log"
  for _ in $(seq 50); do redis_answers "redis://127.0.0.1:$PRIVATE_REDIS_PORT/0" && return; sleep 0.1; done
  echo "private Redis did not start; see $STATE/redis/redis.log" >&2; exit 1
}

up() {
  local db=${DATABASE_URL:-$DEFAULT_DB} redis=${REDIS_URL:-$DEFAULT_REDIS}
  if ! pg_answers "$db"; then
    if [ -n "${DATABASE_URL:-}" ]; then
      echo "DATABASE_URL is set but PostgreSQL does not answer at it: $DATABASE_URL" >&2; exit 1
    fi
    db=postgres://postgres@127.0.0.1:$PRIVATE_PG_PORT/qoelab
    pg_answers "$db" || start_private_pg
  fi
  ensure_database "$db"
  if ! redis_answers "$redis"; then
    if [ -n "${REDIS_URL:-}" ]; then
      echo "REDIS_URL is set but Redis does not answer at it: $REDIS_URL" >&2; exit 1
    fi
    redis=redis://127.0.0.1:$PRIVATE_REDIS_PORT/0
    redis_answers "$redis" || start_private_redis
  fi
  printf 'export DATABASE_URL=%q\nexport REDIS_URL=%q\n' "$db" "$redis" >"$STATE/env"
  echo "==> PostgreSQL: $db"
  echo "==> Redis:      $redis"
}

down() {
  local bin data=$STATE/postgres
  bin=$(pg_bin)
  if [ -f "$data/postmaster.pid" ]; then
    su postgres -s /bin/sh -c "'$bin/pg_ctl' -D '$(readlink -f "$data")' -m fast stop" || true
  fi
  if [ -f "$STATE/redis/redis.pid" ]; then
    kill "$(cat "$STATE/redis/redis.pid")" 2>/dev/null || true
  fi
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  status) [ -f "$STATE/env" ] && cat "$STATE/env" ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
