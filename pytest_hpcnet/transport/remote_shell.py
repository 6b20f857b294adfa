"""One long-lived `sh` per node: commands after the first skip the login shell's start-up.

Every SSH exec request starts the user's login shell, and on real nodes its rc files
(conda, modules, pyenv) often cost more than the command. The transport therefore keeps
one `sh -s` per node on its session and writes each command to it, framed by a random
marker on stdout (with the exit status) and on stderr; each command still runs in its own
`sh -c` under the node's `timeout`, with stdin from /dev/null.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

import paramiko

from pytest_hpcnet.transport.readable import wait_readable

CHUNK = 65536
TAIL = 4096


class ShellBroken(Exception):
    """The shell's channel closed or stalled; the transport drops it and opens another."""


class _Stream:
    """One output stream: the head up to `limit` bytes and a tail to find the marker in."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        if len(chunk) > room:
            self.truncated = True
        self.tail = (self.tail + chunk)[-TAIL:]

    def find(self, pattern: re.Pattern[bytes]) -> re.Match[bytes] | None:
        return pattern.search(self.tail if self.truncated else self.head)

    def text_before(self, match: re.Match[bytes]) -> bytes:
        return bytes(self.head) if self.truncated else bytes(self.head[: match.start()])


class RemoteShell:
    """A `sh -s` on an open SSH transport, running one framed command at a time."""

    def __init__(self, transport: paramiko.Transport, open_timeout_s: float):
        self.channel = transport.open_session(timeout=open_timeout_s)
        self.channel.exec_command("exec /bin/sh -s")
        self.lock = threading.Lock()
        self.broken = False

    def run(self, wrapped: str, deadline: float, limit: int) -> tuple[bytes, bytes, int, bool]:
        """Run one already-wrapped command; (stdout, stderr, status, truncated).

        Raises TimeoutError past `deadline` and ShellBroken if the channel fails; in both
        cases the shell is marked broken and must not be reused.
        """
        mark = f"@@hpcnet-{secrets.token_hex(8)}".encode()
        done_out = re.compile(rb"\n" + mark + rb" (\d+)\n")
        done_err = re.compile(rb"\n" + mark + rb"\n")
        script = (
            f"{wrapped} </dev/null; hx_rc=$?; printf '\\n%s %d\\n' '{mark.decode()}' $hx_rc; "
            f"printf '\\n%s\\n' '{mark.decode()}' >&2\n"
        )
        out, err = _Stream(limit), _Stream(limit)
        try:
            self.channel.sendall(script.encode())
            fd = self.channel.fileno()
            while True:
                while self.channel.recv_ready():
                    out.feed(self.channel.recv(CHUNK))
                while self.channel.recv_stderr_ready():
                    err.feed(self.channel.recv_stderr(CHUNK))
                got_out, got_err = out.find(done_out), err.find(done_err)
                if got_out and got_err:
                    status = int(got_out.group(1))
                    return (
                        out.text_before(got_out),
                        err.text_before(got_err),
                        status,
                        (out.truncated or err.truncated),
                    )
                if self.channel.closed or self.channel.eof_received:
                    raise ShellBroken("the node's shell exited")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                wait_readable(fd, min(remaining, 0.5))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.broken = True
        self.channel.close()
