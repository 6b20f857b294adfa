"""An unreachable node is one reason line: paramiko's own traceback of a failed banner read
does not reach pytest's captured log (nor, through it, report.html)."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport.fanout import Transport


def closing_server() -> tuple[socket.socket, int]:
    """A loopback port that accepts and hangs up at once: no SSH banner ever comes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def unreachable(tmp_path: Path) -> str | None:
    server, port = closing_server()
    (tmp_path / "known_hosts").write_text("")
    path = tmp_path / "inv.yaml"
    path.write_text(
        "cluster: {name: c, region: r}\n"
        f"ssh: {{port: {port}, known_hosts: {tmp_path / 'known_hosts'}, "
        "connect_timeout_s: 2, connect_retries: 1}\n"
        "nodes: [{name: n1, host: 127.0.0.1}]\n"
    )
    transport = Transport(load_inventory(path))
    try:
        return transport.run("n1", "true").unreachable
    finally:
        transport.close()
        server.close()


def test_banner_failure_is_the_reason_line_without_a_traceback(tmp_path: Path, caplog):
    reason = unreachable(tmp_path)
    assert reason and "SSH handshake" in reason
    assert not [r for r in caplog.records if r.name.startswith("paramiko")], caplog.text


def test_with_debug_logging_on_paramiko_says_it_at_debug(tmp_path: Path, caplog):
    with caplog.at_level(logging.DEBUG):
        unreachable(tmp_path)
    mine = [r for r in caplog.records if r.name == "paramiko.transport"]
    assert any("banner" in r.getMessage() for r in mine)
    assert all(r.levelno == logging.DEBUG for r in mine)
