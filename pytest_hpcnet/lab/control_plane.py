"""The lab's own ECS/VPC control plane: a daemon `hpcnet lab up` starts, and what points the
real SDK at it.

The daemon (`python -m pytest_hpcnet.lab.control_plane`) binds 127.0.0.1 on a free port
in the host's namespace (the suite's controller side; no lab node reaches it), answers
with `cloud_api.CloudWorld` in the SDK's shapes, and builds the world again from lab.json
whenever that file changed (`cloud_world.lab_world`), so a console fault applies at once.
It writes its own pidfile and exits once its lab is gone or the pidfile names another daemon;
`lab down` kills it (`stop`).

`RebootInstance` reboots a lab node for real, as far as the lab goes: its sshd and every
session stop, its transient faults clear (`faults.heal_transient`; persistent ones stay),
and after `REBOOT_DOWN_S` its sshd starts again; meanwhile `DescribeInstanceStatus` says
`Stopping`, then `Starting`, and `Running` once sshd is back.

The lab inventory's `cloud:` block names the endpoint (protocol http) and the lab's
credentials file (`cloud.credentials_file`: the SDK's ini format, mode 0600, a dummy
AccessKey drawn per `lab up` that no Alibaba Cloud endpoint knows); the audit registers
the secret with `redact` before any call, so it appears in no report, log or evidence.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from pytest_hpcnet.lab.cloud_api import LOOPBACK, Answer, CloudWorld, Reboot, api_handler, error
from pytest_hpcnet.lab.cloud_world import CONTROLLER, lab_world
from pytest_hpcnet.lab.metadata_server import detach
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.lab.system import LabError

MODULE = "pytest_hpcnet.lab.control_plane"
REBOOT_MODULE = "pytest_hpcnet.lab.reboot"
LIFECHECK_GRACE_S = 30.0
LIFECHECK_EVERY_S = 5.0
READY_S = 20.0
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding `pytest_hpcnet`: the daemon imports the same code as `lab up`."""
KEY_ID = "LTAIlabDummyKeyId0001"
"""The lab's AccessKey id (the secret is drawn per `lab up`)."""
SDK_MODULES = ("alibabacloud_ecs20140526", "alibabacloud_vpc20160428", "alibabacloud_credentials")
CONTROLLER_FLOW = "controller"
INTERNET = "203.0.113.9"
"""TEST-NET-3 (RFC 5737): stands for any host on the internet."""
REBOOT_DOWN_S = 3.0
"""How long a lab node rebooted by RebootInstance is away (sshd stopped) before its sshd
starts again: a real instance takes a minute or more, the lab keeps its tests short."""


def credentials_file(state: LabState) -> Path:
    return state.root / "cloud-credentials.ini"


def write_credentials(state: LabState) -> Path:
    """The lab's credentials file (ini, profile `default`, type access_key), mode 0600."""
    path = credentials_file(state)
    secret = secrets.token_urlsafe(24)
    text = (
        "# hpcnet lab: a dummy AccessKey for the lab's own control plane\n"
        f"[default]\ntype = access_key\naccess_key_id = {KEY_ID}\n"
        f"access_key_secret = {secret}\n"
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return path


def missing_sdk() -> str | None:
    """The first cloud SDK module that is not installed, else None."""
    return next((m for m in SDK_MODULES if importlib.util.find_spec(m) is None), None)


def endpoint(state: LabState) -> str | None:
    return f"{LOOPBACK}:{state.cloud_api_port}" if state.cloud_api_port else None


def inventory_cloud(state: LabState) -> dict:
    """`RebootInstance` reboots a lab node for real, as far as the lab goes: its sshd and every
    session stop, its transient faults clear (`faults.heal_transient`; persistent ones stay),
    and after `REBOOT_DOWN_S` its sshd starts again; meanwhile `DescribeInstanceStatus` says
    `Stopping`, then `Starting`, and `Running` once sshd is back.

    The lab inventory's `cloud:` block: the lab's endpoint, credentials file, and the
        external flows the lab has (the controller's SSH; the internet kept out)."""
    where = endpoint(state)
    if where is None or not state.nodes:
        return {"enabled": False}
    first = state.nodes[0].name
    return {
        "ecs_endpoint": where,
        "vpc_endpoint": where,
        "protocol": "http",
        "credentials_file": str(credentials_file(state)),
        "external_flows": [
            {"name": CONTROLLER_FLOW, "address": CONTROLLER, "target": first, "port": 22},
            {
                "name": "internet",
                "address": INTERNET,
                "target": first,
                "port": 22,
                "expect": "deny",
            },
        ],
    }


def start(state: LabState) -> int:
    """Write the credentials file, start the daemon (it binds, then detaches); records its
    PID and port in `state` (the caller saves) and returns the PID."""
    write_credentials(state)
    log = state.root / "control-plane.log"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    command = [sys.executable, "-m", MODULE]
    command += ["--state-dir", str(state.root), "--log", str(log)]
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=READY_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise LabError("the lab control plane did not start in time") from None
    words = proc.stdout.split()
    if proc.returncode != 0 or len(words) != 2 or not all(w.isdigit() for w in words):
        detail = (proc.stderr.strip().splitlines() or [proc.stdout.strip()])[-1:]
        raise LabError(f"the lab control plane did not start: {detail[0][:120] if detail else ''}")
    state.cloud_api_pid, state.cloud_api_port = int(words[0]), int(words[1])
    return state.cloud_api_pid


def status_line(state: LabState) -> str:
    pid = state.cloud_api_pid
    alive = bool(pid) and Path(f"/proc/{pid}").exists()
    where = endpoint(state) or "-"
    return f"  control plane (ECS/VPC API) http://{where} {'running' if alive else 'STOPPED'}"


# -- the daemon ---------------------------------------------------------------------------


class ControlPlaneServer(ThreadingHTTPServer):
    """Serves the lab's world; exits once its lab is gone or its pidfile names another
    daemon (a newer `lab up`'s). The world is built again only when lab.json changes."""

    daemon_threads = True

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.started = self.last_check = time.monotonic()
        self._world: tuple[tuple[int, int, int], CloudWorld] | None = None
        self._world_lock = threading.Lock()
        self.reboots: dict[str, Reboot] = {}
        """Reboots in progress, kept across rebuilds of the world."""
        self.reboot_down_s = REBOOT_DOWN_S
        super().__init__((LOOPBACK, 0), api_handler(self.answer))

    def answer(self, params: dict[str, str]) -> Answer:
        world = self.world()
        if world is None:
            return 503, error("ServiceUnavailable", "the lab is not up")
        return world.answer(params)

    def world(self) -> CloudWorld | None:
        """The lab's world as lab.json now says (every save replaces the file, so a fault
        applies at the next request); None when the lab is gone."""
        path = self.state_dir / "lab.json"
        with self._world_lock:
            try:
                stat = path.stat()
            except OSError:
                return None
            key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if self._world is None or self._world[0] != key:
                state = LabState.load(self.state_dir)
                if state is None:
                    return None
                world = lab_world(state)
                world.reboots, world.on_reboot = self.reboots, self.reboot
                self._world = (key, world)
            return self._world[1]

    def reboot(self, instance_id: str, reboot: Reboot) -> None:
        """Reboot the lab node of `instance_id` in the background (RebootInstance answers at
        once, as ECS does)."""
        worker = threading.Thread(target=self._reboot, args=(instance_id, reboot), daemon=True)
        worker.start()

    def _reboot(self, instance_id: str, reboot: Reboot) -> None:
        """`lab/reboot.py` in a process of its own (it restarts sshd with the lab's setup
        code, which imports this module); the instance is `Running` once it is done."""
        command = [sys.executable, "-m", REBOOT_MODULE, "--state-dir", str(self.state_dir)]
        command += ["--instance", instance_id, "--down-s", str(self.reboot_down_s)]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:  # the status stays `Starting`: the caller's wait times out
            print(f"reboot of {instance_id} failed: {proc.stderr.strip()}", file=sys.stderr)
            return
        reboot.up_at = time.monotonic()

    def service_actions(self) -> None:
        now = time.monotonic()
        if now - self.started < LIFECHECK_GRACE_S or now - self.last_check < LIFECHECK_EVERY_S:
            return
        self.last_check = now
        gone = not (self.state_dir / "lab.json").exists()
        if gone or read_pidfile(self.state_dir) != os.getpid():
            threading.Thread(target=self.shutdown, daemon=True).start()


def pidfile(state_dir: Path) -> Path:
    """`PID PORT` of the lab's running daemon, written by the daemon itself."""
    return Path(state_dir) / "control-plane.pid"


def write_pidfile(state_dir: Path, port: int) -> None:
    path = pidfile(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()} {port}\n")
    tmp.replace(path)


def read_pidfile(state_dir: Path) -> int | None:
    try:
        return int(pidfile(state_dir).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop(state_dir: Path) -> None:
    """Kill the lab's daemon (the pidfile's PID, if that process is this lab's control
    plane: a PID the kernel gave to another process since is left alone); idempotent."""
    pid = read_pidfile(state_dir)
    if pid is not None and _is_ours(pid, Path(state_dir)):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    pidfile(state_dir).unlink(missing_ok=True)


def _is_ours(pid: int, state_dir: Path) -> bool:
    """Whether `pid` runs this module as the daemon of the lab in `state_dir`."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    if MODULE not in argv or "--state-dir" not in argv[:-1]:
        return False
    served = argv[argv.index("--state-dir") + 1]
    return Path(served).resolve() == state_dir.resolve()


def main(argv: list[str] | None = None) -> int:
    """Bind, then detach, printing `PID PORT` (unless --foreground)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=Path(os.devnull))
    parser.add_argument("--foreground", action="store_true")
    args = parser.parse_args(argv)
    server = ControlPlaneServer(args.state_dir)
    port = server.server_address[1]
    if not args.foreground:
        detach(args.log, port)
    else:
        print(os.getpid(), port, flush=True)
    write_pidfile(args.state_dir, port)
    try:
        server.serve_forever(poll_interval=1.0)
    finally:
        if read_pidfile(args.state_dir) == os.getpid():
            pidfile(args.state_dir).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
