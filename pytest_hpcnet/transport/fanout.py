"""SSH transport: one connection per node per session, bounded parallel fan-out.

fabric builds each `Connection` (ssh_config, jump hosts, keys); the hot path runs
commands on the paramiko channel directly and waits on its file descriptor, which
costs the controller far less CPU than invoke's per-stream threads. Every command
is wrapped in the node's own `timeout` so a command past its deadline is killed on
the node (with its process group), not merely abandoned.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from fabric import Connection
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from pytest_hpcnet.inventory.models import Inventory, Node
from pytest_hpcnet.redact import redact
from pytest_hpcnet.transport.connect import (
    AcceptNewPolicy,
    close_chain,
    connect_timeouts,
    describe_connect_error,
    fabric_config,
    failed_hop,
    gateway_chain,
    is_connection_level,
    whole_seconds,
)
from pytest_hpcnet.transport.local import LOCAL, run_local
from pytest_hpcnet.transport.readable import wait_readable
from pytest_hpcnet.transport.remote_shell import RemoteShell, ShellBroken
from pytest_hpcnet.transport.results import TIMED_OUT_STATUSES, CommandResult, NodeUnreachable

MAX_OUTPUT_BYTES = 8 * 1024 * 1024
KILL_GRACE_S = 2.0
CHUNK = 65536


@dataclass
class NodeSession:
    """The connection state of one node for the session."""

    node: Node
    lock: threading.Lock = field(default_factory=threading.Lock)
    connection: Connection | None = None
    unreachable: str | None = None
    connects: int = 0
    retries: int = 0
    shell: RemoteShell | None = None
    failed_at: tuple[str, int, bool] = ("", 22, False)  # host, port, is a jump host


def remote_command(command: str, timeout_s: float) -> str:
    """Wrap `command` so the node itself kills it (and its process group) at `timeout_s`."""
    secs = max(1, int(timeout_s + 0.999))
    return f"timeout -k {int(KILL_GRACE_S)} {secs} sh -c {shlex.quote(command)}"


def _read_channel(
    channel: paramiko.Channel, deadline: float, limit: int
) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout and stderr until the command exits or `deadline`; bounded in memory."""
    out, err = bytearray(), bytearray()
    truncated = False
    fd = channel.fileno()
    while True:
        while channel.recv_ready():
            chunk = channel.recv(CHUNK)
            if len(out) < limit:
                out += chunk
            else:
                truncated = True
        while channel.recv_stderr_ready():
            chunk = channel.recv_stderr(CHUNK)
            if len(err) < limit:
                err += chunk
            else:
                truncated = True
        finished = channel.exit_status_ready() and (channel.eof_received or channel.closed)
        if finished and not channel.recv_ready() and not channel.recv_stderr_ready():
            return bytes(out), bytes(err), False, truncated
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(out), bytes(err), True, truncated
        wait_readable(fd, min(remaining, 0.5))


CommandListener = Callable[[CommandResult], None]
IDLE_POLL_S = 1.0
"""How often each connection's paramiko thread wakes up while nothing arrives (paramiko's own
default: 0.1 s). Data wakes it at once either way; on a 256-node lab the 0.1 s polls of 256
idle threads cost the controller about as much CPU as the run's own work."""


def quiet_idle_polls(conn: Connection, interval_s: float = IDLE_POLL_S) -> None:
    """Make the connection's transport thread poll its socket every `interval_s` when idle
    (it checks for close and rekeying then; received data never waits for the poll)."""
    transport = conn.client.get_transport() if conn.client is not None else None
    sock = getattr(transport, "sock", None)
    if sock is not None and hasattr(sock, "settimeout"):
        sock.settimeout(interval_s)


def _result(
    name: str,
    command: str,
    started: float,
    t0: float,
    out: bytes,
    err: bytes,
    status: int | None,
    timed_out: bool,
    truncated: bool,
    lost: str | None = None,
) -> CommandResult:
    """What a command did, its text decoded and redacted; an exit status of the node-side
    `timeout` (124, 137) is a timeout."""
    return CommandResult(
        node=name,
        command=redact(command),
        exit_status=status,
        stdout=redact(out.decode("utf-8", errors="replace")),
        stderr=redact(err.decode("utf-8", errors="replace")),
        duration_s=time.monotonic() - t0,
        started_at=started,
        timed_out=timed_out or status in TIMED_OUT_STATUSES,
        unreachable=lost,
        truncated=truncated,
    )


class Transport:
    """Connections to every node of an inventory, opened lazily, one per node."""

    def __init__(self, inventory: Inventory, concurrency: int | None = None):
        self.inventory = inventory
        self.ssh = inventory.ssh
        self.concurrency = concurrency or self.ssh.concurrency
        self.sessions = {n.name: NodeSession(n) for n in inventory.nodes}
        self.listeners: list[CommandListener] = []
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="hpcnet-ssh")
        self._known_hosts_lock = threading.Lock()
        self._parsed_known_hosts: tuple[tuple[int, int], paramiko.HostKeys] | None = None
        self._config = fabric_config(self.ssh)
        self._config_lock = threading.Lock()  # invoke's Config.clone() is not thread-safe
        self._closed = False

    # -- connections -------------------------------------------------------------------

    def _connection_for(self, node: Node) -> Connection:
        """The node's Connection: the inventory's values win, ssh_config fills in the rest
        (HostName, User, Port, IdentityFile, ProxyJump); our host-key policy on every hop."""
        kwargs = self._connect_kwargs(node)
        timeout = whole_seconds(self.ssh.connect_timeout_s)
        jump = node.ssh.jump_host or self.ssh.jump_host
        gateway = None
        if jump:
            gateway = Connection(
                jump, config=self._config, connect_timeout=timeout, connect_kwargs=dict(kwargs)
            )
        conn = Connection(
            node.host,
            user=node.ssh.user or self.ssh.user,
            port=node.ssh.port or self.ssh.port,
            config=self._config,
            connect_timeout=timeout,
            connect_kwargs=kwargs,
            gateway=gateway,
        )
        for hop in gateway_chain(conn):  # fabric sets AutoAddPolicy on every client it makes
            self._apply_host_key_policy(hop.client, hop.host, hop.port)
        return conn

    def _connect_kwargs(self, node: Node) -> dict:
        """paramiko's connect() arguments. An inventory key turns off ~/.ssh/id_* and the
        agent; fabric appends ssh_config's IdentityFile after it, as `ssh -i` does."""
        kwargs: dict = connect_timeouts(self.ssh)
        identity = node.ssh.identity_file or self.ssh.identity_file
        if identity:
            kwargs["key_filename"] = [str(Path(identity).expanduser())]
            kwargs["look_for_keys"] = False
            kwargs["allow_agent"] = False
        if self.ssh.passphrase:
            kwargs["passphrase"] = self.ssh.passphrase
        return kwargs

    def _apply_host_key_policy(self, client: paramiko.SSHClient, host: str, port: int) -> None:
        """The client gets known_hosts' keys for the name paramiko looks up (`host`, or
        `[host]:port` off port 22), from one parse of the file per session: each client
        loading the whole file made N connections parse N lines each (2.4 s at 256 nodes)."""
        known = Path(self.ssh.known_hosts).expanduser()
        if known.exists():
            name = host if int(port or 22) == 22 else f"[{host}]:{port}"
            found = self._known_hosts(known).lookup(name) or {}
            for keytype, key in found.items():
                client.get_host_keys().add(name, keytype, key)
        if self.ssh.host_key_policy == "accept-new":
            client.set_missing_host_key_policy(AcceptNewPolicy(known, self._known_hosts_lock))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())

    def unrecorded_host_keys(self) -> list[str]:
        """Every hop (node or jump host, as ssh_config resolves it) whose key known_hosts
        does not record, under the strict policy; nothing is connected. `accept-new`: []."""
        if self.ssh.host_key_policy != "strict":
            return []
        known = Path(self.ssh.known_hosts).expanduser()
        recorded = self._known_hosts(known) if known.exists() else paramiko.HostKeys()
        missing: dict[str, None] = {}
        for node in self.inventory.nodes:
            if node.connection == LOCAL:
                continue
            for hop in gateway_chain(self._connection_for(node)):
                name = hop.host if int(hop.port or 22) == 22 else f"[{hop.host}]:{hop.port}"
                if not recorded.lookup(name):
                    missing[name] = None
        return list(missing)

    def _known_hosts(self, path: Path) -> paramiko.HostKeys:
        """known_hosts parsed once, again when it changes (`accept-new` appends to it)."""
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._known_hosts_lock:
            if self._parsed_known_hosts is None or self._parsed_known_hosts[0] != stamp:
                self._parsed_known_hosts = (stamp, paramiko.HostKeys(str(path)))
            return self._parsed_known_hosts[1]

    def connect(self, name: str) -> Connection:
        """The node's open connection; opens it on first use. Raises `NodeUnreachable`."""
        session = self.sessions[name]
        with session.lock:
            if session.unreachable:
                raise NodeUnreachable(name, session.unreachable)
            conn = session.connection
            if conn is not None and conn.is_connected:
                return conn
            if conn is not None:  # dropped: its jump hosts may still be open
                close_chain(conn)
                session.connection = None
            if self._closed:
                raise NodeUnreachable(name, "session is closing")

            def count_retry(state: RetryCallState) -> None:
                session.retries += 1

            retrying = Retrying(
                retry=retry_if_exception(is_connection_level),
                stop=stop_after_attempt(self.ssh.connect_retries)
                | stop_after_delay(self.ssh.connect_timeout_s),  # a node costs one timeout at most
                wait=wait_exponential(multiplier=0.2, max=2.0),
                before_sleep=count_retry,
                reraise=True,
            )
            try:
                for attempt in retrying:
                    with attempt:
                        conn = self._attempt(session)
            except Exception as exc:  # every failure becomes one recorded reason
                host, port, jump = session.failed_at
                session.unreachable = describe_connect_error(
                    exc, host, port, self.ssh.known_hosts, jump
                )
                raise NodeUnreachable(name, session.unreachable) from None
            session.connection = conn
            quiet_idle_polls(conn)
            return conn

    def _attempt(self, session: NodeSession) -> Connection:
        """One try at opening the node's connection; a failed try is closed and the hop it
        failed on (the node or a jump host) recorded in `session.failed_at`."""
        node = session.node
        session.failed_at = (node.host, node.ssh.port or self.ssh.port or 22, False)
        with self._config_lock:
            conn = self._connection_for(node)
        session.connects += 1
        try:
            conn.open()
        except Exception:
            hop = failed_hop(conn)
            session.failed_at = (hop.host, hop.port, hop is not conn)
            close_chain(conn)
            raise
        return conn

    def unreachable(self) -> dict[str, str]:
        """Nodes found unreachable so far, with their reasons."""
        return {n: s.unreachable for n, s in self.sessions.items() if s.unreachable}

    def note_unreachable(self, name: str, reason: str) -> None:
        """Another process (an xdist worker) found `name` unreachable: so is it here."""
        session = self.sessions.get(name)
        if session is not None and not session.unreachable:
            session.unreachable = reason

    def retries(self) -> dict[str, int]:
        """Nodes whose connection needed retries, with how many."""
        return {n: s.retries for n, s in self.sessions.items() if s.retries}

    def connections_opened(self) -> dict[str, int]:
        return {n: s.connects for n, s in self.sessions.items()}

    # -- commands ----------------------------------------------------------------------

    def run(self, name: str, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run `command` on node `name`; never raises for node or command failures."""
        timeout_s = timeout_s or self.ssh.command_timeout_s
        started = time.time()
        t0 = time.monotonic()
        wrapped = remote_command(command, timeout_s)
        if self.sessions[name].node.connection == LOCAL:
            ran = run_local(wrapped, timeout_s, KILL_GRACE_S, MAX_OUTPUT_BYTES)
            result = _result(name, command, started, t0, *ran)
        else:
            result = self._run_ssh(name, command, wrapped, started, t0, timeout_s)
        for listener in self.listeners:
            listener(result)
        return result

    def _run_ssh(
        self, name: str, command: str, wrapped: str, started: float, t0: float, timeout_s: float
    ) -> CommandResult:
        try:
            conn = self.connect(name)
            deadline = t0 + timeout_s + KILL_GRACE_S + 1.0
            shell = self._shell(name, conn)
            if shell is not None and shell.lock.acquire(blocking=False):
                try:
                    out, err, status, truncated = shell.run(wrapped, deadline, MAX_OUTPUT_BYTES)
                    timed_out = False
                except TimeoutError:
                    out, err, status, truncated, timed_out = b"", b"", None, False, True
                finally:
                    shell.lock.release()
            else:
                out, err, status, timed_out, truncated = self._exec(conn, wrapped, deadline)
            lost = None
            if timed_out and status is None:  # not even the node's own `timeout` answered
                lost = self._lost_if_silent(name, conn, time.monotonic() - t0)
            return _result(name, command, started, t0, out, err, status, timed_out, truncated, lost)
        except NodeUnreachable as exc:
            return self._failed(name, command, started, t0, exc.reason)
        except (paramiko.SSHException, OSError, EOFError, ShellBroken) as exc:
            reason = f"connection lost: {exc or type(exc).__name__}"
            self.sessions[name].connection = None
            self.sessions[name].shell = None
            return self._failed(name, command, started, t0, reason)

    def _lost_if_silent(self, name: str, conn: Connection, waited_s: float) -> str | None:
        """After a command got no reply at all: try one new channel. A node that cannot open
        one within the connect timeout is lost for the session (its later commands fail at
        once); its reason is returned. None: the node still answers."""
        limit = self.ssh.connect_timeout_s
        try:
            conn.client.get_transport().open_session(timeout=limit).close()
            return None
        except (paramiko.SSHException, OSError, EOFError, AttributeError):
            pass
        session = self.sessions[name]
        with session.lock:
            session.unreachable = (
                f"stopped answering mid-run: no reply to a command for {waited_s:.0f} s "
                f"and no new SSH channel within {limit:g} s"
            )
            session.shell = None
            session.connection = None
        close_chain(conn)
        return session.unreachable

    def _shell(self, name: str, conn: Connection) -> RemoteShell | None:
        """The node's long-lived shell, opened on first use (None when it cannot be)."""
        session = self.sessions[name]
        with session.lock:
            if session.shell is not None and not session.shell.broken:
                return session.shell
            try:
                session.shell = RemoteShell(conn.client.get_transport(), self.ssh.connect_timeout_s)
            except (paramiko.SSHException, OSError):
                session.shell = None
            return session.shell

    def _exec(
        self, conn: Connection, wrapped: str, deadline: float
    ) -> tuple[bytes, bytes, int | None, bool, bool]:
        """One command on its own exec channel (when the node's shell is busy)."""
        channel = conn.client.get_transport().open_session(timeout=self.ssh.connect_timeout_s)
        try:
            channel.exec_command(wrapped)
            out, err, timed_out, truncated = _read_channel(channel, deadline, MAX_OUTPUT_BYTES)
            status = None if timed_out else channel.recv_exit_status()
        finally:
            channel.close()
        return out, err, status, timed_out, truncated

    @staticmethod
    def _failed(name: str, command: str, started: float, t0: float, reason: str) -> CommandResult:
        return _result(name, command, started, t0, b"", b"", None, False, False, reason)

    def run_on_all(
        self,
        command: str | Callable[[Node], str],
        nodes: Iterable[str] | None = None,
        timeout_s: float | None = None,
        together: bool = False,
    ) -> dict[str, CommandResult]:
        """Run on every node (or `nodes`) in parallel within the concurrency bound, or with
        `together` all at once (a measurement whose nodes must run at the same time: fio's
        aggregate, a perftest round), whatever the bound."""
        names = list(nodes) if nodes is not None else list(self.sessions)

        def one(name: str) -> CommandResult:
            cmd = command(self.sessions[name].node) if callable(command) else command
            return self.run(name, cmd, timeout_s)

        if together and len(names) > self.concurrency:
            with ThreadPoolExecutor(len(names), thread_name_prefix="hpcnet-together") as pool:
                return dict(zip(names, pool.map(one, names), strict=False))
        return dict(zip(names, self._pool.map(one, names), strict=False))

    def submit(
        self, name: str, command: str, timeout_s: float | None = None
    ) -> Future[CommandResult]:
        """`run` on the session's pool, within the concurrency bound, without waiting."""
        return self._pool.submit(self.run, name, command, timeout_s)

    def close(self) -> None:
        """Close every connection; idempotent."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        for session in self.sessions.values():
            with session.lock:
                if session.shell is not None:
                    session.shell.close()
                    session.shell = None
                if session.connection is not None:
                    close_chain(session.connection)
                    session.connection = None
