"""The Swift target: a single-node Swift all-in-one from Debian's packages (one replica, tempauth).

The proxy's pipeline is SAIO's (``bulk`` included: rclone deletes through bulk-delete, which
answers 405 without it).

memcached (tempauth keeps its tokens there), the account, container and object servers and the
proxy run in the server namespace, each in one process (``workers = 0``) under Debian's
``/usr/bin/python3`` (Swift is a system package, not in the project's venv), with ``-v`` so their
logs go to the instance's files instead of syslog. The rings are built in the instance directory
(``swift_dir``); storage is a plain directory (``mount_check = false``). Swift's servers read the
hash path prefix/suffix and the storage policies from ``/etc/swift/swift.conf`` whatever
``swift_dir`` says; its text is part of ``config``.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qoelab.emulation.system import find_tool
from qoelab.errors import ParameterError
from qoelab.storage.base import Popen, Run, StorageTarget, instance_dir, run_here, run_quietly, wait_for

PYTHON = "/usr/bin/python3"
SYSTEM_SWIFT_CONF = Path("/etc/swift/swift.conf")
PROXY_PORT = 8080
SERVER_PORTS = {"object": 6200, "container": 6201, "account": 6202}
MEMCACHED_PORT = 11211
USER, KEY = "test:tester", "testing"


class SwiftTarget(StorageTarget):
    kind = "swift"
    skip_in_tail = ("STDERR: (", "Started child", "wsgi starting up")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.auth_url = ""
        self.user, self.key = USER, KEY

    def client_argv(self, *args: str) -> list[str]:
        """The ``swift`` command (python-swiftclient) against this target: ``client_argv("stat")``."""
        return [
            find_tool("swift", "python3-swiftclient"),
            "-A",
            self.auth_url,
            "-U",
            self.user,
            "-K",
            self.key,
            *args,
        ]


def _server_conf(kind: str, ip: str, port: int, swift_dir: Path, devices: Path, extra: str = "") -> str:
    return f"""[DEFAULT]
bind_ip = {ip}
bind_port = {port}
workers = 0
user = {getpass.getuser()}
swift_dir = {swift_dir}
devices = {devices}
mount_check = false
log_name = {kind}-server
log_level = INFO

[pipeline:main]
pipeline = {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}
{extra}"""


def _proxy_conf(ip: str, port: int, swift_dir: Path, memcached: str) -> str:
    return f"""[DEFAULT]
bind_ip = {ip}
bind_port = {port}
workers = 0
user = {getpass.getuser()}
swift_dir = {swift_dir}
log_name = proxy-server
log_level = INFO

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempauth copy \
dlo slo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = {KEY} .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = {memcached}

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:bulk]
use = egg:swift#bulk

[filter:copy]
use = egg:swift#copy

[filter:dlo]
use = egg:swift#dlo

[filter:slo]
use = egg:swift#slo
"""


RING_SCRIPT = """
import sys
from swift.common.ring import RingBuilder
etc, ip, part_power = sys.argv[1], sys.argv[2], int(sys.argv[3])
for kind, port in zip(sys.argv[4::2], map(int, sys.argv[5::2])):
    builder = RingBuilder(part_power, 1, 1)
    builder.add_dev({"region": 1, "zone": 1, "ip": ip, "port": port, "device": "d1", "weight": 100})
    builder.rebalance()
    builder.save(f"{etc}/{kind}.builder")
    builder.get_ring().save(f"{etc}/{kind}.ring.gz")
    print(f"{kind} ring: {len(builder.devs)} device, {builder.parts} partitions, {builder.replicas} replica")
"""


def _build_rings(target: SwiftTarget, ip: str, part_power: int) -> str:
    """account/container/object rings with one device each (one replica), in ``etc``.

    swift-ring-builder's own RingBuilder (create, add, rebalance, write the ring) in one Python
    process: the command line needs four runs per ring, about 4 s in all on this host.
    """
    etc = target.directory / "etc"
    ports = [str(x) for kind, port in SERVER_PORTS.items() for x in (kind, port)]
    out = run_here([PYTHON, "-c", RING_SCRIPT, str(etc), ip, str(part_power), *ports], timeout=60)
    missing = [kind for kind in SERVER_PORTS if not (etc / f"{kind}.ring.gz").is_file()]
    if out.returncode != 0 or missing:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise target.fail(
            f"building the {', '.join(missing) or 'Swift'} rings failed: {detail[-1] if detail else ''}"
        )
    return out.stdout.strip()


@functools.cache
def _versions() -> dict[str, str]:
    code = "import swift, swiftclient.version as v; print(swift.__version__, v.version_string)"
    out = run_here([PYTHON, "-c", code]).stdout.split()
    memcached = run_here([find_tool("memcached", "memcached"), "-V"]).stdout.strip()
    return {
        "swift": out[0] if out else "",
        "swiftclient": out[1] if len(out) > 1 else "",
        "memcached": memcached,
    }


@contextlib.contextmanager
def swift_target(
    popen: Popen,
    run: Run | None,
    ip: str,
    workdir: Path | None,
    prefix: str,
    *,
    port: int = PROXY_PORT,
    part_power: int = 8,
    keep_files: bool = False,
    ready_timeout_s: float = 30.0,
) -> Iterator[SwiftTarget]:
    """Swift all-in-one behind ``http://ip:port/auth/v1.0`` (user ``test:tester``, key ``testing``).

    ``port`` must differ from the servers' (6200-6202) and memcached's (11211). Raises TargetError
    with the servers' log tails if an authenticated HEAD of the account does not answer.
    """
    if (
        not isinstance(port, int)
        or not 1 <= port <= 65535
        or port in (*SERVER_PORTS.values(), MEMCACHED_PORT)
    ):
        raise ParameterError("port", f"must be 1-65535 and not 6200-6202 or 11211 (taken), got {port!r}")
    if not isinstance(part_power, int) or not 1 <= part_power <= 16:
        raise ParameterError("part_power", f"must be an integer from 1 to 16, got {part_power!r}")
    for tool, package in (
        ("swift-proxy-server", "swift-proxy"),
        ("swift-object-server", "swift-object"),
        ("swift-container-server", "swift-container"),
        ("swift-account-server", "swift-account"),
    ):
        find_tool(tool, package)
    memcached = find_tool("memcached", "memcached")
    run = run or run_here
    target = SwiftTarget(prefix, instance_dir(prefix, "swift", workdir), keep_files)
    try:
        etc, devices = target.directory / "etc", target.directory / "srv"
        etc.mkdir()
        (devices / "d1").mkdir(parents=True)
        ring = _build_rings(target, ip, part_power)
        configs = {
            f"{kind}-server.conf": _server_conf(kind, ip, p, etc, devices) for kind, p in SERVER_PORTS.items()
        }
        configs["proxy-server.conf"] = _proxy_conf(ip, port, etc, f"127.0.0.1:{MEMCACHED_PORT}")
        for name, text in configs.items():
            (etc / name).write_text(text)
        user = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses root without it
        procs = [
            target.start(
                popen,
                "memcached",
                [memcached, *user, "-l", "127.0.0.1", "-p", str(MEMCACHED_PORT), "-U", "0", "-m", "64"],
            )
        ]
        for kind in (*SERVER_PORTS, "proxy"):
            server = find_tool(f"swift-{kind}-server")
            procs.append(
                target.start(
                    popen, f"{kind}-server", [PYTHON, server, str(etc / f"{kind}-server.conf"), "-v"]
                )
            )
        host = f"[{ip}]" if ":" in ip else ip
        target.auth_url = f"http://{host}:{port}/auth/v1.0"
        target.endpoint = target.auth_url
        target.config.update(
            server="swift",
            versions=dict(_versions()),
            address=ip,
            port=port,
            auth="tempauth",
            user=USER,
            replicas=1,
            part_power=part_power,
            storage="directory (mount_check = false)",
            configs=configs,
            system_swift_conf=SYSTEM_SWIFT_CONF.read_text() if SYSTEM_SWIFT_CONF.is_file() else None,
            rings=ring,
        )
        last = [subprocess.CompletedProcess([], 1, "", "")]

        def serving() -> bool:
            if target.exited():
                return False
            # No client retries (their back-off would be our wait); the loop retries instead.
            last[0] = run_quietly(
                run, target.client_argv("--retries", "0", "--timeout", "3", "stat"), timeout=5
            )
            return last[0].returncode == 0

        if not wait_for(serving, procs, ready_timeout_s):
            exited = target.exited()
            why = f"{', '.join(exited)} exited" if exited else f"did not answer within {ready_timeout_s:g} s"
            probe = (last[0].stderr or last[0].stdout).strip().splitlines()
            raise target.fail(f"Swift {why} at {target.auth_url}" + (f" ({probe[-1]})" if probe else ""))
    except BaseException:
        target.stop()
        raise
    try:
        yield target
    finally:
        target.stop()
