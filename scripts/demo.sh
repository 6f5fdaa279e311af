#!/usr/bin/env bash
# `make demo`: migrate, create the researcher login, start the web server, a lab-host worker and the
# scheduler in the background, run a small real sweep and print where to look.
#   scripts/demo.sh start | stop
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
STATE=$ROOT/.state
RUN=$STATE/run
LOGS=$STATE/logs
mkdir -p "$RUN" "$LOGS"
# Logs are the owner's only (a log line may name a host or a failing request). Not a global umask:
# the worker's trials share files with desktop and guest processes that may run as other users.
chmod 700 "$LOGS"
BIND=${QOELAB_BIND:-127.0.0.1:8000}
URL=http://${BIND/0.0.0.0/127.0.0.1}
USERNAME=${QOELAB_DEMO_USER:-researcher}
SPEC=${QOELAB_DEMO_SPEC:-examples/demo.yaml}

# A value generated once and kept in .state, so running the demo again keeps logins and tokens.
# kept NAME [BYTES]: a shorter value kept before (the 32-character secret key of older demos) is remade.
kept() {
  local f=$STATE/$1 n=${2:-24}
  [ -s "$f" ] && [ "$(tr -d '\n' <"$f" | wc -c)" -ge $((n * 4 / 3)) ] ||
    .venv/bin/python -c "import secrets; print(secrets.token_urlsafe($n))" >"$f"
  chmod 600 "$f"; cat "$f"
}

stop_all() {
  for name in worker scheduler proxy web; do
    local pidf=$RUN/$name.pid
    if [ -f "$pidf" ]; then
      local pid; pid=$(cat "$pidf")
      if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pid" 2>/dev/null || true
      fi
      rm -f "$pidf"
    fi
  done
}

launch() {  # launch NAME CMD... : in its own process group, output to .state/logs/NAME.log
  local name=$1; shift
  install -m 600 /dev/null "$LOGS/$name.log"  # 0600 even when the file existed before
  setsid "$@" >"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/$name.pid"
}

# The web tier (docs/security.md, "The web tier"): gunicorn on a Unix socket that only its owner can
# open, nginx on $BIND in front of it. nginx reads each request whole before gunicorn's sync workers
# see it, so clients that send slowly (or never finish) cannot hold the workers.
start_web() {
  local conf=$RUN/nginx
  mkdir -p "$conf/tmp"
  rm -f "$RUN/web.sock"
  QOELAB_BEHIND_PROXY=true launch web .venv/bin/gunicorn --chdir backend qoelab_web.wsgi \
    -b "unix:$RUN/web.sock" --umask 0077 --no-control-socket --workers 2 --timeout 120
  # Artifact uploads are the largest bodies: their limit plus room for the multipart framing.
  QOELAB_PROXY_LISTEN=$BIND QOELAB_PROXY_UPSTREAM=unix:$RUN/web.sock \
    QOELAB_PROXY_CLIENT_TIMEOUT=${QOELAB_PROXY_CLIENT_TIMEOUT:-10s} \
    QOELAB_PROXY_MAX_BODY=$((${QOELAB_MAX_ARTIFACT_BYTES:-2147483648} + 1048576)) \
    .venv/bin/python - scripts/nginx/qoelab.conf.template "$conf/qoelab.conf" <<'PY'
import os, re, string, sys
text = string.Template(open(sys.argv[1]).read()).safe_substitute(os.environ)
if left := re.findall(r"\$\{QOELAB_[A-Z_]+\}", text):
    sys.exit(f"nginx template: no value for {', '.join(left)}")
open(sys.argv[2], "w").write(text)
PY
  # The socket is root's when the demo runs as root, so the workers are too (as gunicorn is).
  local user=""; [ "$(id -u)" -eq 0 ] && user="user root root;"
  # No access log: evaluators' invite links carry their token in the path.
  cat >"$conf/nginx.conf" <<NGINX
daemon off;
worker_processes 1;
pid $conf/nginx.pid;
error_log stderr warn;
$user
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $conf/tmp/body;
  proxy_temp_path $conf/tmp/proxy;
  fastcgi_temp_path $conf/tmp/fastcgi;
  uwsgi_temp_path $conf/tmp/uwsgi;
  scgi_temp_path $conf/tmp/scgi;
  include $conf/qoelab.conf;
}
NGINX
  launch proxy nginx -e stderr -p "$conf" -c "$conf/nginx.conf"
}

start() {
  set -a; . "$STATE/env"; set +a
  export QOELAB_SECRET_KEY; QOELAB_SECRET_KEY=$(kept secret_key 50)  # production settings want 50+
  export QOELAB_DEBUG=false
  export QOELAB_ALLOWED_HOSTS=${QOELAB_ALLOWED_HOSTS:-*}
  export QOELAB_BASE_URL=${QOELAB_BASE_URL:-$URL}  # invite links (never from the Host header)
  export QOELAB_MEDIA_ROOT=${QOELAB_MEDIA_ROOT:-$STATE/media}
  export QOELAB_LIVE_SESSION_PROVIDER=${QOELAB_LIVE_SESSION_PROVIDER:-ratings.live_provider}
  local manage=(.venv/bin/python backend/manage.py)
  local password host host_token api_token
  password=$(kept researcher_password)
  host=${QOELAB_HOST_NAME:-$(hostname)}
  host_token=$(kept host_token)
  api_token=$(kept api_token)

  stop_all
  echo "==> migrating the database"
  "${manage[@]}" migrate --noinput >"$LOGS/migrate.log" || { cat "$LOGS/migrate.log"; exit 1; }
  "${manage[@]}" collectstatic --noinput >/dev/null
  # API tokens are stored hashed: the demo keeps its own in .state so it stays the same across runs.
  "${manage[@]}" create_researcher "$USERNAME" --password "$password" --token "$api_token" >/dev/null 2>&1
  "${manage[@]}" add_host "$host" --token "$host_token" >/dev/null 2>&1

  echo "==> starting web ($URL), scheduler and worker (logs in .state/logs/)"
  start_web
  launch scheduler "${manage[@]}" scheduler
  # Tokens go by environment, not argv: anyone on the host can read a command line in ps.
  # The worker reaches the backend over HTTP only: the web server's secrets stay out of its
  # environment (and it drops its own token from it once read: qoelab.celery_app.scrub_secrets).
  # The broker URL too: it carries the password of a Redis scripts/services.sh started.
  QOELAB_HOST_TOKEN=$host_token QOELAB_BROKER_URL=$REDIS_URL launch worker \
    env -u QOELAB_SECRET_KEY -u DATABASE_URL -u REDIS_URL \
    .venv/bin/qoelab worker --backend "$URL" --name "$host"
  for _ in $(seq 120); do
    curl -fsS "$URL/api/status/" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -fsS "$URL/api/status/" >/dev/null || { tail -30 "$LOGS/web.log"; echo "the web server did not start" >&2; exit 1; }

  echo "==> running the demo sweep $SPEC"
  QOELAB_API_TOKEN=$api_token .venv/bin/qoelab sweep run "$SPEC" --api "$URL" --wait

  cat <<MSG

qoelab is running.
  Dashboard: $URL/
  Log in as: $USERNAME / $password
  API token: $api_token   (Authorization: Token <token>; docs at $URL/api/docs/)
  Logs:      .state/logs/   Stop with: make stop
MSG
}

# Sourced (tests): define the functions only.
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

case "${1:-start}" in
  start) start ;;
  stop) stop_all ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
