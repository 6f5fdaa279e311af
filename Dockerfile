# One image for web, scheduler and worker (docker-compose.yml picks the command).
FROM debian:12-slim

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1
RUN echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      ca-certificates curl git make gcc libc6-dev procps psmisc \
      python3 python3-venv python3-dev \
      iproute2 iperf3 iputils-ping tshark ffmpeg util-linux \
      tigervnc-standalone-server x11vnc xtightvncviewer virt-viewer xserver-xspice \
      x2goserver x2goserver-xsession pyhoca-cli openssh-server xdotool x11-apps x11-utils xvfb chromium socat spice-html5 \
      qemu-system-x86 qemu-utils debootstrap e2fsprogs \
      pkg-config libssl-dev ethtool \
      postgresql-client redis-tools nodejs npm \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /srv/qoelab
COPY workers/pyproject.toml workers/pyproject.toml
COPY backend/pyproject.toml backend/pyproject.toml
COPY . .
RUN python3 -m venv .venv \
 && .venv/bin/pip install --no-cache-dir -e ./workers -e ./backend \
 && make -s -C workers/csrc \
 && make -s -C workers/qoelab/vose/csrc \
 && (cd frontend && npm ci --no-audit --no-fund && npm run build) \
 && QOELAB_SECRET_KEY=build-only .venv/bin/python backend/manage.py collectstatic --noinput

ENV PATH=/srv/qoelab/.venv/bin:$PATH
EXPOSE 8000
CMD ["gunicorn", "--chdir", "backend", "qoelab_web.wsgi", "-b", "0.0.0.0:8000", "--workers", "3"]
