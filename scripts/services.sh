#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer. Use DATABASE_URL / REDIS_URL (or the local defaults) when
# they answer; otherwise start a private PostgreSQL cluster and Redis under .state/ (git-ignored).
# The lab never connects as a database superuser: given one (the host's cluster trusting local
# connections, or the private cluster's postgres), it makes the role `qoelab` with a password kept
# in .state/db_password and hands it the database. A Redis it starts has a password too.
# Writes the URLs in use to .state/env (0600), which the Makefile sources.
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
DB_ROLE=qoelab

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# The server part of a database URL with the maintenance database, to test and to CREATE DATABASE.
maint_url() { echo "${1%/*}/postgres"; }
db_name() { local n=${1##*/}; echo "${n%%\?*}"; }

pg_answers() { psql "$(maint_url "$1")" -Atqc 'select 1' >/dev/null 2>&1; }
# The password goes to redis-cli by environment (argv is public, and redis-cli reads ":pw@" as user "").
redis_answers() {
  local url=$1 auth=""
  if [[ $url =~ ^(rediss?://)([^@/]*)@(.*)$ ]]; then
    [[ ${BASH_REMATCH[2]} == *:* ]] && auth=${BASH_REMATCH[2]#*:}
    url=${BASH_REMATCH[1]}${BASH_REMATCH[3]}
  fi
  env ${auth:+REDISCLI_AUTH=$auth} redis-cli -u "$url" ping 2>/dev/null | grep -q PONG
}

ensure_database() {
  local url=$1 name
  name=$(db_name "$url")
  if ! psql "$(maint_url "$url")" -Atqc "select 1 from pg_database where datname='$name'" | grep -q 1; then
    psql "$(maint_url "$url")" -qc "create database \"$name\"" >/dev/null
    echo "==> created database $name"
  fi
}

# A password generated once and kept in .state (0600): hex, so it needs no quoting in SQL or a URL.
kept_password() {
  local f=$STATE/$1
  [ -s "$f" ] || (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$f")
  chmod 600 "$f"; cat "$f"
}
private_pg_password() { kept_password pg_password; }

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

# USER and HOST:PORT of a postgres:// URL.
url_user() { local rest=${1#*://}; rest=${rest%%@*}; echo "${rest%%:*}"; }
url_hostport() { local rest=${1#*@}; echo "${rest%%/*}"; }
is_superuser() { [ "$(psql "$(maint_url "$1")" -Atqc 'select rolsuper from pg_roles where rolname = current_user')" = t ]; }

# From a superuser's URL to the lab role's: create (or update) role qoelab, make it the owner of the
# database and of what an earlier superuser run created in it, and of leftover test and benchmark
# databases (test_qoelab*, qoelab_*: they are dropped and made again, which only an owner may do).
lab_role() {
  local admin=$1 name password url
  name=$(db_name "$admin")
  password=$(kept_password db_password)
  # By stdin, never argv: ps shows every process's arguments to every local user.
  psql "$(maint_url "$admin")" -qAt -v ON_ERROR_STOP=1 >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_ROLE') THEN
    CREATE ROLE $DB_ROLE LOGIN CREATEDB PASSWORD '$password';
  ELSE
    ALTER ROLE $DB_ROLE LOGIN CREATEDB NOSUPERUSER NOCREATEROLE PASSWORD '$password';
  END IF;
END \$\$;
SQL
  ensure_database "$admin"
  local db
  for db in $(psql "$(maint_url "$admin")" -Atqc \
      "select datname from pg_database where datname = '$name' or datname like 'test\\_$name%' or datname like '$name\\_%'"); do
    psql "$(maint_url "$admin")" -qc "alter database \"$db\" owner to $DB_ROLE" >/dev/null
  done
  # Tables (their sequences and indexes follow), views and free sequences an earlier run made as the superuser.
  psql "${admin%/*}/$name" -qAt -v ON_ERROR_STOP=1 >/dev/null <<SQL
DO \$\$ DECLARE r record; BEGIN
  FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
             AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = '$DB_ROLE')
             AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')
                             AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass)
  LOOP
    EXECUTE format('ALTER %s public.%I OWNER TO $DB_ROLE', CASE r.relkind WHEN 'S' THEN 'SEQUENCE'
      WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, r.relname);
  END LOOP;
END \$\$;
SQL
  url="postgres://$DB_ROLE:$password@$(url_hostport "$admin")/$name"
  pg_answers "$url" || { echo "the role $DB_ROLE cannot log in at $(url_hostport "$admin") (pg_hba.conf?)" >&2; exit 1; }
  echo "==> PostgreSQL: made role $DB_ROLE (not a superuser; password in .state/db_password) the owner of database $name at $(url_hostport "$admin")"
  # A wrong password let in: the cluster trusts local connections, whatever the roles' passwords.
  if pg_answers "postgres://$DB_ROLE:not-$password@$(url_hostport "$admin")/$name"; then
    echo "==> warning: PostgreSQL at $(url_hostport "$admin") trusts local connections (pg_hba.conf): any local user can connect as any role; use scram-sha-256 there" >&2
  fi
  LAB_DB_URL=$url
}

private_redis_url() { echo "redis://:$(kept_password redis_password)@127.0.0.1:$PRIVATE_REDIS_PORT/0"; }

start_private_redis() {
  command -v redis-server >/dev/null || { echo "Redis is not installed; install the Debian package 'redis-server'" >&2; exit 1; }
  mkdir -p "$STATE/redis"
  # A Redis this script started before it had a password: stop it, start it again with one.
  redis-cli -p "$PRIVATE_REDIS_PORT" ping 2>/dev/null | grep -q PONG && redis-cli -p "$PRIVATE_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  echo "==> starting private Redis on 127.0.0.1:$PRIVATE_REDIS_PORT (password in .state/redis_password)"
  # The password by a 0600 file, not argv.
  (umask 077; printf 'requirepass %s\n' "$(kept_password redis_password)" >"$STATE/redis/redis.conf")
  redis-server "$STATE/redis/redis.conf" --port "$PRIVATE_REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --save "" --appendonly no --dir "$STATE/redis" --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/redis/redis.log"
  for _ in $(seq 50); do redis_answers "$(private_redis_url)" && return; sleep 0.1; done
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
  if is_superuser "$db"; then
    lab_role "$db"
    db=$LAB_DB_URL
  else
    ensure_database "$db"
    echo "==> PostgreSQL: role $(url_user "$db") (not a superuser), as DATABASE_URL gives it"
  fi
  if ! redis_answers "$redis"; then
    if [ -n "${REDIS_URL:-}" ]; then
      echo "REDIS_URL is set but Redis does not answer at it: $REDIS_URL" >&2; exit 1
    fi
    redis=$(private_redis_url)
    redis_answers "$redis" || start_private_redis
  fi
  # 0600: the URL may carry the private cluster's password.
  (umask 077; printf 'export DATABASE_URL=%q\nexport REDIS_URL=%q\n' "$db" "$redis" >"$STATE/env")
  chmod 600 "$STATE/env"
  echo "==> PostgreSQL: $(sed -E 's#//([^:/@]+):[^@]*@#//\1:***@#' <<<"$db")"
  echo "==> Redis:      $(sed -E 's#//([^:/@]*):[^@]*@#//\1:***@#' <<<"$redis")"
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
