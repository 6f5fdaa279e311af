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
# The private cluster's password: generated once, kept in the git-ignored state (0600).
PG_PASSWORD_FILE=$STATE/pg_password

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

private_pg_password() {
  [ -s "$PG_PASSWORD_FILE" ] || (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$PG_PASSWORD_FILE")
  chmod 600 "$PG_PASSWORD_FILE"; cat "$PG_PASSWORD_FILE"
}

# Password over TCP (scram-sha-256), peer on the socket (only the OS user 'postgres' as itself):
# no more `trust`, where any local user could connect as the superuser.
PRIVATE_PG_HBA='local all all peer
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256'

# A cluster made before it had a password (trust): set the password and the rules above, reload.
secure_private_pg() {
  local bin=$1 data=$2 password
  [ -f "$data/pg_hba.conf" ] || return 0
  grep -Eq '^[^#]*[[:space:]]trust([[:space:]]|$)' "$data/pg_hba.conf" || return 0
  password=$(private_pg_password)
  echo "==> giving the private PostgreSQL cluster a password (it used trust)"
  printf "ALTER ROLE postgres PASSWORD '%s';\n" "$password" \
    | su postgres -s /bin/sh -c "psql -h /tmp -p $PRIVATE_PG_PORT -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 -f -" \
    >/dev/null
  printf '%s\n' "$PRIVATE_PG_HBA" >"$data/pg_hba.conf"
  su postgres -s /bin/sh -c "'$bin/pg_ctl' -D '$data' reload >/dev/null"
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
    # The password reaches initdb in a file only 'postgres' reads, removed at once (never in argv).
    local pwfile; pwfile=$(mktemp); private_pg_password >"$pwfile"; chown postgres: "$pwfile"
    su postgres -s /bin/sh -c "'$bin/initdb' -D '$data' -U postgres -E UTF8 \
        --auth-local=peer --auth-host=scram-sha-256 --pwfile='$pwfile' >/dev/null" || { rm -f "$pwfile"; exit 1; }
    rm -f "$pwfile"
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
    db=postgres://postgres:$(private_pg_password)@127.0.0.1:$PRIVATE_PG_PORT/qoelab
    pg_answers "$db" || start_private_pg
    # Also when it was already running: trust accepts any password, so it answered above.
    secure_private_pg "$(pg_bin)" "$(readlink -f "$STATE/postgres")"
  fi
  ensure_database "$db"
  if ! redis_answers "$redis"; then
    if [ -n "${REDIS_URL:-}" ]; then
      echo "REDIS_URL is set but Redis does not answer at it: $REDIS_URL" >&2; exit 1
    fi
    redis=redis://127.0.0.1:$PRIVATE_REDIS_PORT/0
    redis_answers "$redis" || start_private_redis
  fi
  # 0600: the URL may carry the private cluster's password.
  (umask 077; printf 'export DATABASE_URL=%q\nexport REDIS_URL=%q\n' "$db" "$redis" >"$STATE/env")
  chmod 600 "$STATE/env"
  echo "==> PostgreSQL: $(sed -E 's#//([^:/@]+):[^@]*@#//\1:***@#' <<<"$db")"
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
