"""Opening a node's SSH connection: fabric's Config, the hops, host keys, and why it failed.

fabric builds each `Connection` from the inventory and ssh_config (HostName, User, Port,
IdentityFile, ProxyJump); this module puts our host-key policy on every hop it makes,
names the hop a failure happened on, and says in one line why a node was not reached.
"""

from __future__ import annotations

import logging
import shlex
import socket
import threading
from pathlib import Path

import paramiko
from fabric import Config, Connection

from pytest_hpcnet.inventory.models import SshSettings


class QuietTransportErrors(logging.Filter):
    """paramiko's transport thread logs every failed handshake at ERROR with its traceback
    (`Error reading SSH protocol banner`, line by line); the node's reason line already says
    it. Those records become DEBUG: kept where DEBUG logging is on, dropped otherwise."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


PARAMIKO_TRANSPORT = logging.getLogger("paramiko.transport")
if not any(isinstance(f, QuietTransportErrors) for f in PARAMIKO_TRANSPORT.filters):
    PARAMIKO_TRANSPORT.addFilter(QuietTransportErrors())


class AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """OpenSSH's `accept-new`: record an unknown key; a changed key is still refused."""

    def __init__(self, path: Path, lock: threading.Lock):
        self.path = path
        self.lock = lock

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey):
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def is_connection_level(exc: BaseException) -> bool:
    """Retry refused, reset and connect timeouts; never auth, host key or DNS failures."""
    if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException)):
        return False
    if isinstance(exc, (socket.gaierror, FileNotFoundError)):
        return False
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return True
    if isinstance(exc, (ConnectionRefusedError, ConnectionResetError, TimeoutError, EOFError)):
        return True
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        return "banner" in text or "reset" in text.lower()
    return isinstance(exc, OSError)


def describe_connect_error(
    exc: BaseException, host: str, port: int, known_hosts: str, jump: bool = False
) -> str:
    """The one-line reason `host` (the node, or its `jump` host) could not be reached, with
    the fix where there is one."""
    where = f"{'jump host ' if jump else ''}{host}:{port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        recorded = host if port == 22 else f"[{host}]:{port}"
        return (
            f"host key mismatch for {where}: it offers a different {exc.key.get_name()} "
            f"key than {known_hosts} records; if the host was reinstalled, verify the new key "
            f"and run: ssh-keygen -R {shlex.quote(recorded)} -f {known_hosts}"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {where}: {exc}"
    if isinstance(exc, socket.gaierror):
        return f"DNS: cannot resolve {'jump host ' if jump else ''}{host!r} ({exc.strerror})"
    if isinstance(exc, FileNotFoundError):
        return f"key file not found for {where}: {exc.filename}"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return f"connection refused on {where} (is sshd running, is the port open?)"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused on {where}"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timed out connecting to {where} (no answer; host down or port filtered)"
    if isinstance(exc, paramiko.ChannelException):
        return f"the jump host could not open a tunnel to {where}: {exc.text}"
    if isinstance(exc, paramiko.SSHException):
        return _describe_ssh_error(str(exc), where, known_hosts)
    if isinstance(exc, OSError):
        return f"network error reaching {where}: {exc.strerror or exc}"
    return f"{type(exc).__name__} reaching {where}: {exc}"


def _describe_ssh_error(text: str, where: str, known_hosts: str) -> str:
    if "not found in known_hosts" in text:
        return (
            f"host key unknown: {where} is not in {known_hosts}; add it (ssh-keyscan) "
            "after verifying it, or set ssh.host_key_policy: accept-new"
        )
    if "banner" in text or "No existing session" in text:
        return (
            f"timed out waiting for the SSH handshake from {where} "
            "(the port answers but sshd does not: hung or overloaded)"
        )
    return f"SSH error with {where}: {text}"


def gateway_chain(conn: Connection) -> list[Connection]:
    """`conn` and every Connection it tunnels through, nearest first. A ProxyCommand (a
    string) ends the chain: it is the user's own program, a byte pipe through which the
    node's host key is still checked end to end."""
    chain = [conn]
    while isinstance(chain[-1].gateway, Connection):
        chain.append(chain[-1].gateway)
    return chain


def failed_hop(conn: Connection) -> Connection:
    """The hop an `open()` of `conn` failed on: hops open from the far end, so the first
    one, from there, that is not connected."""
    return next((hop for hop in reversed(gateway_chain(conn)) if not hop.is_connected), conn)


def close_chain(conn: Connection) -> None:
    """Close `conn` and its jump hosts (fabric's `close()` leaves the gateway open)."""
    for hop in gateway_chain(conn):
        hop.close()


def whole_seconds(seconds: float) -> int:
    return int(seconds + 0.999)


def connect_timeouts(ssh: SshSettings) -> dict[str, float]:
    return {
        "banner_timeout": ssh.connect_timeout_s,
        "auth_timeout": ssh.connect_timeout_s,
        "channel_timeout": ssh.connect_timeout_s,
    }


def fabric_config(ssh: SshSettings) -> Config:
    """fabric's Config: ssh_config read once (`ssh.config_file` alone, like `ssh -F`, or else
    ~/.ssh/config and /etc/ssh/ssh_config); the connect timeouts are the defaults of the
    ProxyJump hops fabric builds from ssh_config too."""
    path = str(Path(ssh.config_file).expanduser()) if ssh.config_file else None
    loaded = Config(
        runtime_ssh_path=path,
        overrides={
            "load_ssh_configs": True,
            "timeouts": {"connect": whole_seconds(ssh.connect_timeout_s)},
            "connect_kwargs": connect_timeouts(ssh),
        },
    )
    # A clone owns its parsed rules: fabric clones the config for every ProxyJump hop, and
    # a clone of a file-loaded config re-reads the files into it (1000 nodes: 100 s).
    return loaded.clone()
