"""Every parser strips terminal escape sequences before parsing (issue 13).

`nvidia-smi topo -m` underlines its header with `ESC[4m` .. `ESC[0m` (samples/nvidia_smi);
`ip -c` and colourised shells do the same to names and values. Each output here is
coloured line by line the way a terminal-minded tool does it and must parse exactly as
the plain text does. The nccl, perftest, ping and rdma parsers have their own tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpcnet.probes import (
    fio,
    links,
    metadata,
    ports,
    rdma,
    rdma_parsers,
    sysctl,
    versions,
)
from pytest_hpcnet.probes.text import strip_ansi
from tests import iperf3
from tests.corpus import sample

FIXTURES = Path(__file__).parents[1] / "fixtures"
UNDERLINE, BOLD_CYAN, RESET = "\x1b[4m", "\x1b[1;36m", "\x1b[0m"


def coloured(text: str) -> str:
    """Every non-blank line underlined, as `nvidia-smi topo -m` does its header."""
    return "".join(
        f"{UNDERLINE}{line.rstrip(chr(10))}{RESET}\n" if line.strip() else line
        for line in text.splitlines(keepends=True)
    )


def _sample(area: str, name: str) -> str:
    return sample(area, name).read_text()


CASES: list[tuple[str, Callable[[str], object], str, str]] = [
    ("sysctl", sysctl.parse_sysctl, "fixture", "sysctl/network.txt"),
    ("versions", versions.parse_versions, "inline", "kernel=6.18.44\nerdma=0.2.36\n"),
    ("metadata", metadata.parse_metadata, "fixture", "metadata/token-all-keys.txt"),
    ("listing", metadata.parse_listing, "corpus", "metadata/alibaba-blog-curl-latest-listing.txt"),
    ("connect", ports.parse_connect, "fixture", "ports/connect-mixed.txt"),
    ("listener", ports.parse_listener, "fixture", "ports/listener-busy.txt"),
    ("ip text", links.parse_interfaces, "corpus",
     "ip_link_ping/ip-addr-centos7-two-eni-mtu9001-aws.txt"),
    ("ip json", links.parse_interfaces, "fixture", "links/ip-j-s-link.json"),
    ("iperf3 json", iperf3.parse_iperf3, "corpus",
     "iperf3/cloudpilot-iperf3.9-tcp-aws-to-ibm.json"),
    ("iperf3 text", iperf3.parse_iperf3, "fixture", "iperf3/client-4-streams-sum.txt"),
    ("findmnt", fio.parse_mount, "fixture", "fio/findmnt-cpfs-nfs4.json"),
    ("proc mounts", fio.parse_mount, "fixture", "fio/proc-mounts-cpfs.txt"),
    ("lsmod", rdma.parse_erdma_module, "fixture", "rdma/lsmod-erdma.txt"),
    ("compat mode", rdma.parse_compat_mode, "inline", "compat_mode=Y\n"),
    ("ibstat detected", rdma_parsers.parse_rdma_output, "fixture", "rdma/ibstat-two-ports.txt"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("parse", "source", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_coloured_output_parses_as_the_plain_one(parse, source, where):
    if source == "inline":
        text = where
    elif source == "fixture":
        text = (FIXTURES / where).read_text()
    else:
        text = _sample(*where.split("/", 1))
    plain = parse(text)
    assert plain == parse(coloured(text))
    assert plain == parse(text.replace("\n", f"{RESET}\n").replace(" ", f" {BOLD_CYAN}", 3))


def test_strip_ansi_removes_csi_osc_and_two_byte_escapes_only():
    text = "\x1b[4mGPU0\tCPU Affinity\x1b[0m \x1b]0;title\x07x \x1b(B[ok] 50% \x1b[1;32mUP\x1b[m"
    assert strip_ansi(text) == "GPU0\tCPU Affinity x [ok] 50% UP"
    assert strip_ansi(None) == "" and strip_ansi("plain [text]") == "plain [text]"
