"""Files an inventory names for SSH (keys, known_hosts), checked when it loads.

A missing key would otherwise surface only after the connect timeout, as every node
unreachable; here it is one line naming the inventory key and the path."""

from __future__ import annotations

import os
from pathlib import Path


def file_problem(value: str) -> str | None:
    """Why the file a key names cannot be read (the path as written, expanded if it
    differs), or None."""
    path = Path(value).expanduser()
    shown = value if str(path) == value else f"{value} ({path})"
    if not path.exists():
        return f"{shown}: no such file"
    if not path.is_file():
        return f"{shown}: not a file"
    if not os.access(path, os.R_OK):
        return f"{shown}: not readable by {os.environ.get('USER') or os.getuid()}"
    return None


def ssh_file_problems(ssh, nodes, known_hosts_named: bool) -> list[str]:
    """`key: problem` for each file the SSH settings and node overrides name.

    `known_hosts` is checked only when the inventory names it and host keys are strict
    (with accept-new it is created on first use)."""
    found: list[str] = []
    checks = [("ssh.identity_file", ssh.identity_file)]  # config_file: checked by its model
    if known_hosts_named and ssh.host_key_policy == "strict":
        checks.append(("ssh.known_hosts", ssh.known_hosts))
    checks += [(f"nodes[{n.name}].ssh.identity_file", n.ssh.identity_file) for n in nodes]
    seen: set[str] = set()
    for key, value in checks:
        if not value or (key.startswith("nodes[") and value in seen):
            continue
        seen.add(value)
        problem = file_problem(value)
        if problem:
            if key == "ssh.known_hosts":
                problem += (
                    " (host_key_policy strict verifies every node against it: create it "
                    "with ssh-keyscan, or set host_key_policy: accept-new)"
                )
            found.append(f"{key}: {problem}")
    return found
