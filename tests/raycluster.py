"""A real local Ray cluster for tests: `ray start --head` in a short temp dir, stopped by
killing exactly the processes that belong to that temp dir.

Never `ray stop --force`: it kills every Ray process on the machine (other test sessions, a
user's cluster), and raylet / gcs_server ignore SIGTERM for seconds, so the cluster's own
processes are SIGKILLed, as `ray stop --force` would. Trial children follow their worker by
PR_SET_PDEATHSIG. (Measured on the 2-core CI box: start 6-9 s, stop about 1 s.)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import psutil

# Quiet and small: no usage-stats prompt; no token auth (ray 2.5x turns it on by default and
# writes ~/.ray/auth_token, which a later driver connecting by address then fails against).
QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


@dataclass
class Head:
    address: str
    temp_dir: str
    env: dict[str, str] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_bin() -> str:
    return os.path.join(os.path.dirname(sys.executable), "ray")


def start_head(num_cpus: int = 2, *, resources: dict[str, float] | None = None,
               env: dict[str, str] | None = None, attempts: int = 2) -> Head:
    """A head node; started again once if Ray gives up waiting for its own raylet (seen
    once at load average 12 on the 2-core box: "The current node timed out during
    startup")."""
    for attempt in range(attempts):
        try:
            return _start_head(num_cpus, resources, env)
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _start_head(num_cpus: int, resources: dict[str, float] | None,
                env: dict[str, str] | None) -> Head:
    # AF_UNIX paths are limited to 107 bytes and Ray appends ~61 characters
    # (/session_<date>_<time>_<micros>_<pid>/sockets/plasma_store): a pytest tmp_path is too
    # long, a /tmp/vtrayXXXXXXXX dir is not.
    temp_dir = tempfile.mkdtemp(prefix="vtray", dir="/tmp")
    port = _free_port()
    cmd = [_ray_bin(), "start", "--head", f"--port={port}", f"--num-cpus={num_cpus}",
           "--num-gpus=0", f"--temp-dir={temp_dir}", "--disable-usage-stats",
           "--include-dashboard=false", "--no-monitor", "--object-store-memory=83886080",
           "--node-ip-address=127.0.0.1"]
    if resources:
        cmd.append(f"--resources={json.dumps(resources)}")
    out = subprocess.run(cmd, env={**os.environ, **QUIET_ENV, **(env or {})},
                         capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        stop_dir(temp_dir)
        raise RuntimeError(f"ray start failed: {out.stderr[-2000:]}")
    return Head(address=f"127.0.0.1:{port}", temp_dir=temp_dir,
                env={**QUIET_ENV, "RAY_ADDRESS": f"127.0.0.1:{port}"})


def cluster_procs(temp_dir: str) -> list[psutil.Process]:
    """Every process of the cluster rooted in temp_dir: Ray's daemons (their first three
    arguments name the temp dir or are Ray's own programs) and all their descendants
    (workers rename themselves ray::..., agents are raylet children). Never this process or
    an ancestor: a shell whose command line holds the temp dir is not the cluster."""
    me = psutil.Process()
    exclude = {me.pid, *(a.pid for a in me.parents())}
    roots = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            args = p.info["cmdline"] or []
            if p.pid in exclude or not any(temp_dir in a for a in args):
                continue
            if any("/site-packages/ray/" in a or a.endswith(("/gcs_server", "/raylet"))
                   for a in args[:3]):
                roots.append(p)
        except psutil.Error:
            pass
    seen: dict[int, psutil.Process] = {}
    for root in roots:
        seen[root.pid] = root
        try:
            for child in root.children(recursive=True):
                if child.pid not in exclude:
                    seen[child.pid] = child
        except psutil.Error:
            pass
    return list(seen.values())


def stop_dir(temp_dir: str) -> list[int]:
    """SIGKILL every process of this cluster; the pids still alive after (none, normally)."""
    procs = cluster_procs(temp_dir)
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)
    left = [p.pid for p in cluster_procs(temp_dir)]
    if not left:
        shutil.rmtree(temp_dir, ignore_errors=True)
    return left


def trial_children(marker: str | None = None) -> list[psutil.Process]:
    """vramtune trial children alive anywhere on the machine (optionally: whose environment
    or command line holds ``marker``)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if "vramtune.measure.child" in cmd and (marker is None or marker in cmd
                                                    or marker in str(p.environ())):
                found.append(p)
        except psutil.Error:
            pass
    return found
