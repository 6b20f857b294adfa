"""Unit tests of the RDMA device parsers and decisions."""

from __future__ import annotations

import subprocess

import pytest

from pytest_hpcnet.probes import rdma, rdma_parsers
from tests.corpus import corpus_files


def test_two_erdma_devices(fixture_text):
    result = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-two-devices.txt"))
    assert result.names() == ("erdma_0", "erdma_1")
    assert result.problems == ()
    dev0 = result.device("erdma_0")
    assert dev0 is not None
    assert dev0.transport == "eRDMA (0)"
    assert dev0.vendor_id == "0x1ded"
    assert dev0.vendor_part_id == "4223"
    assert dev0.phys_port_cnt == 1
    port = dev0.port(1)
    assert port is not None
    assert (port.state, port.reported_state) == ("ACTIVE", "PORT_ACTIVE")
    assert (port.max_mtu, port.active_mtu, port.link_layer) == (4096, 1024, "Ethernet")
    down = result.device("erdma_1").port(1)
    assert (down.state, down.reported_state) == ("DOWN", "PORT_DOWN")


def test_crlf_and_leading_noise_give_same_result(fixture_text):
    text = fixture_text("rdma", "erdma-two-devices.txt")
    noisy = "some banner\r\n" + text.replace("\n", "\r\n") + "trailing junk\r\n"
    plain = rdma_parsers.parse_ibv_devinfo(text)
    crlf = rdma_parsers.parse_ibv_devinfo(noisy)
    assert crlf.devices == plain.devices
    assert crlf.notices == ("some banner", "trailing junk")


def test_mac_named_erdma_verbose(fixture_text):
    result = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-mac-named-verbose.txt"))
    assert result.names() == ("00163e0a1b2c",)
    dev = result.devices[0]
    port = dev.port(1)
    assert port.state == "INIT"
    assert port.physical_state == "LINK_UP"
    assert rdma.is_erdma(dev)
    assert rdma.match_devices(result) == ()  # the default glob misses it by name
    assert len(result.notices) == 1 and result.notices[0].startswith("libibverbs: Warning")
    assert not any("GID" in n for n in result.notices)


def test_verbose_attribute_lines_are_not_notices_but_tool_errors_are(fixture_text):
    # a real `-v` device block up to its port, then devinfo.c's error when the port query fails
    lines = fixture_text("rdma", "published-irdma1-e810-v.txt").splitlines(keepends=True)
    attributes = "".join(lines[:68])
    assert "tag matching not supported" in attributes and lines[68].split() == ["port:", "1"]
    result = rdma_parsers.parse_ibv_devinfo(attributes + "Failed to query port 1 props\n")
    assert result.notices == ("Failed to query port 1 props",)
    assert result.incomplete == "irdma1: no port block (output cut short?)"
    # without `-v` attributes a line the parser does not know stays a notice
    plain = rdma_parsers.parse_ibv_devinfo("hca_id:\tx\n\tphys_port_cnt:\t1\nstray line\n")
    assert plain.notices == ("stray line",)


def test_not_installed(fixture_text):
    result = rdma_parsers.parse_ibv_devinfo(
        fixture_text("rdma", "ibv_devinfo-command-not-found.txt")
    )
    assert result.tool_missing
    assert result.devices == ()
    assert rdma_parsers.parse_ibv_devinfo("hpcnet: ibv_devinfo not found\n").tool_missing
    assert rdma_parsers.parse_ibstat("hpcnet: ibstat not found").tool_missing
    assert rdma_parsers.parse_rdma_link("sh: 1: rdma: not found").tool_missing


def test_empty_and_garbage_never_raise():
    for parse in (
        rdma_parsers.parse_ibv_devinfo,
        rdma_parsers.parse_ibstat,
        rdma_parsers.parse_rdma_link,
    ):
        for text in ("", "\x00\xff garbage", "hca_id:\n", "port: 1\n", "[not json"):
            result = parse(text)
            assert isinstance(result, rdma.RdmaDevices)
    assert rdma_parsers.parse_ibv_devinfo("").problems


def test_unreadable_state_is_a_problem():
    text = "hca_id: erdma_0\n\tport: 1\n\t\tstate: WEIRD (9)\n"
    result = rdma_parsers.parse_ibv_devinfo(text)
    assert result.devices[0].port(1).state is None
    assert any("unreadable state" in p for p in result.problems)


def test_port_count_mismatch_is_a_problem():
    text = "hca_id: mlx5_0\n\tphys_port_cnt: 2\n\tport: 1\n\t\tstate: PORT_ACTIVE (4)\n"
    result = rdma_parsers.parse_ibv_devinfo(text)
    assert any("reports 2 ports but lists 1" in p for p in result.problems)


def test_ibstat_two_ports(fixture_text):
    result = rdma_parsers.parse_ibstat(fixture_text("rdma", "ibstat-two-ports.txt"))
    dev = result.device("mlx5_0")
    assert dev.ca_type == "MT4123"
    assert dev.node_guid == "b859:9f03:0022:626e"
    assert dev.phys_port_cnt == 2
    assert [(p.number, p.state, p.physical_state, p.rate_gbps) for p in dev.ports] == [
        (1, "ACTIVE", "LINK_UP", 200.0),
        (2, "DOWN", "POLLING", 10.0),
    ]


def test_rdma_link_text_and_json_agree(fixture_text):
    text = rdma_parsers.parse_rdma_link(fixture_text("rdma", "rdma-link-erdma.txt"))
    js = rdma_parsers.parse_rdma_link(fixture_text("rdma", "rdma-link-erdma.json"))
    assert text.names() == js.names() == ("erdma_0", "erdma_1")
    assert text.device("erdma_1").port(1).netdev == "eth2"
    assert js.device("erdma_1").port(1).state == "INIT"
    assert js.device("erdma_1").port(1).physical_state == "POLLING"


@pytest.mark.parametrize(
    ("line", "name", "state", "phys", "netdev"),
    [
        ("0/1: i40iw0/1: state DOWN physical_state NOP", "i40iw0", "DOWN", "NOP", None),
        (
            "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 "
            "state DOWN physical_state POLLING",
            "mlx5_7",
            "DOWN",
            "POLLING",
            None,
        ),
        (
            "link mlx5_7/1 state ACTIVE physical_state LINK_UP netdev ib7",
            "mlx5_7",
            "ACTIVE",
            "LINK_UP",
            "ib7",
        ),
        (
            "\tlink erdma_0/1    state ACTIVE physical_state LINK_UP netdev eth1\r",
            "erdma_0",
            "ACTIVE",
            "LINK_UP",
            "eth1",
        ),
    ],
)
def test_rdma_link_formats(line, name, state, phys, netdev):
    result = rdma_parsers.parse_rdma_link(line)
    port = result.device(name).port(1)
    assert (port.state, port.physical_state, port.netdev) == (state, phys, netdev)


def test_match_devices_glob(fixture_text):
    result = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-two-devices.txt"))
    assert [d.name for d in rdma.match_devices(result)] == ["erdma_0", "erdma_1"]
    assert [d.name for d in rdma.match_devices(result, "erdma_1")] == ["erdma_1"]
    assert rdma.match_devices(result.devices, "mlx5*") == ()


def test_compare_sources_reports_state_disagreement(fixture_text):
    ibv = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-two-devices.txt"))
    link = rdma_parsers.parse_rdma_link(
        "link erdma_0/1 state DOWN physical_state DISABLED netdev eth1\n"
        "link erdma_2/1 state ACTIVE physical_state LINK_UP netdev eth3\n"
    )
    diffs = rdma.compare_sources(ibv, link)
    assert "ibv_devinfo shows erdma_0 port 1 PORT_ACTIVE, rdma link shows DOWN" in diffs
    assert "ibv_devinfo shows device erdma_1, rdma link does not" in diffs
    assert "rdma link shows device erdma_2, ibv_devinfo does not" in diffs
    assert len(diffs) == 3


def test_compare_sources_agreeing(fixture_text):
    ibv = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-two-devices.txt"))
    link = rdma_parsers.parse_rdma_link(fixture_text("rdma", "rdma-link-erdma.txt"))
    assert rdma.compare_sources(ibv, link) == ()


def test_compare_ports_and_physical_state():
    ibstat = rdma_parsers.parse_ibstat(
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
        "\tPort 2:\n\t\tState: Down\n"
    )
    link = rdma_parsers.parse_rdma_link("link mlx5_0/1 state ACTIVE physical_state POLLING\n")
    diffs = rdma.compare_sources(ibstat, link)
    assert diffs == (
        "ibstat shows mlx5_0 port 2, rdma link does not",
        "ibstat shows mlx5_0 port 1 physical state LINK_UP, rdma link shows POLLING",
    )


def test_autodetect(fixture_text):
    assert (
        rdma_parsers.parse_rdma_output(fixture_text("rdma", "ibstat-two-ports.txt")).source
        == "ibstat"
    )
    assert rdma_parsers.parse_rdma_output(fixture_text("rdma", "rdma-link-erdma.txt")).source == (
        "rdma link"
    )
    assert rdma_parsers.parse_rdma_output(fixture_text("rdma", "erdma-two-devices.txt")).source == (
        "ibv_devinfo"
    )


def test_erdma_module(fixture_text):
    assert rdma.parse_erdma_module(fixture_text("rdma", "lsmod-erdma.txt")).loaded is True
    assert rdma.parse_erdma_module(fixture_text("rdma", "lsmod-no-erdma.txt")).loaded is False
    assert rdma.parse_erdma_module("module erdma loaded\nerdma 135168 0\n").loaded is True
    assert rdma.parse_erdma_module("module erdma not loaded\n").loaded is False
    unknown = rdma.parse_erdma_module("something else")
    assert unknown.loaded is None and unknown.problems


@pytest.mark.parametrize(
    ("text", "raw", "enabled"),
    [
        ("compat_mode=Y\n", "Y", True),
        ("compat_mode=N\r\n", "N", False),
        ("1\n", "1", True),
        ("compat_mode=0", "0", False),
        ("compat_mode=maybe", "maybe", None),
        ("compat_mode!module not loaded", None, None),
        ("", None, None),
    ],
)
def test_compat_mode(text, raw, enabled):
    result = rdma.parse_compat_mode(text)
    assert (result.raw, result.enabled) == (raw, enabled)
    assert bool(result.problems) == (enabled is None)


def test_command_builders_quote_and_guard():
    cmd = rdma.ibv_devinfo_command("erdma_0; rm -rf /", verbose=True)
    assert "'erdma_0; rm -rf /'" in cmd
    assert "2>&1" in cmd and "hpcnet: ibv_devinfo not found" in cmd
    assert "ibstat 'mlx5 0'" in rdma.ibstat_command("mlx5 0")
    assert "rdma link show" in rdma.rdma_link_command()


def _sh(command: str) -> str:
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=20, check=False
    ).stdout


def test_commands_run_in_sh_without_the_tools():
    # on a machine without RDMA tools the guard prints the marker the parser understands
    out = _sh(rdma.ibv_devinfo_command())
    result = rdma_parsers.parse_ibv_devinfo(out)
    assert result.tool_missing or result.devices or result.no_devices
    module = rdma.parse_erdma_module(_sh(rdma.erdma_module_command()))
    assert module.loaded is not None
    compat = rdma.parse_compat_mode(_sh(rdma.compat_mode_command()))
    assert compat.raw is not None or compat.problems


# ---------------------------------------------------------------------------
# fail closed: real outputs cut inside a device block (tests/fixtures/rdma/PROVENANCE.md)


@pytest.mark.parametrize(
    ("parse", "name", "device", "needle"),
    [
        # the cut hides mlx4_1's port 2, which is PORT_DOWN in the real output
        ("parse_ibv_devinfo", "real-heioy-mlx4-cut-after-port-1.txt", "mlx4_1", "2 ports"),
        ("parse_ibv_devinfo", "real-erdma-h20-cut-before-port.txt", "erdma_0", "no port"),
        ("parse_ibv_devinfo", "real-erdma-h20-cut-in-state.txt", "erdma_0", "PORT_AC"),
        # the same damage in `ibv_devinfo -v` output (the one the facts script runs)
        ("parse_ibv_devinfo", "published-heioy-mlx4_1-i2-v.txt", "mlx4_1", "2 ports"),
        ("parse_ibv_devinfo", "real-irdma1-v-cut-in-device-attributes.txt", "irdma1", "no port"),
        ("parse_ibv_devinfo", "real-irdma1-v-cut-in-state.txt", "irdma1", "PORT_AC"),
        # whole as plain output would be: -v prints more after link_layer (devinfo.c)
        ("parse_ibv_devinfo", "real-cx6dx-v-cut-after-link-layer.txt", "rocep61s0f1", "speed"),
        ("parse_ibv_devinfo", "real-cx6dx-v-cut-before-phys-state.txt", "rocep61s0f1", "phys"),
        ("parse_rdma_link", "real-gx10-rdma-link-cut-in-last-line.txt", "roceP2p1s0f1", "state"),
        ("parse_ibstat", "real-kaust-ibstat-cut-after-physical-state.txt", "mlx5_0", "link"),
    ],
)
def test_truncated_device_block_is_incomplete(fixture_text, parse, name, device, needle):
    result = getattr(rdma_parsers, parse)(fixture_text("rdma", name))
    assert result.incomplete is not None and "\n" not in result.incomplete
    assert result.incomplete.startswith(device + ":") and needle in result.incomplete
    assert result.device(device).truncated is not None


def test_verbose_port_needs_phys_state_on_transport_0_only():
    # old devinfo.c prints `-v`'s phys_state only for transport 0 (IBV_TRANSPORT_IB)
    def verbose(transport: str) -> str:
        return (
            f"hca_id:\tdev\n\ttransport:\t\t\t{transport}\n\tphys_port_cnt:\t\t\t1\n"
            "\tmax_mr_size:\t\t\t0xffffffffffffffff\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_mtu:\t\t1024 (3)\n"
            "\t\t\tlink_layer:\t\tEthernet\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n"
        )

    assert rdma_parsers.parse_ibv_devinfo(verbose("iWARP (1)")).incomplete is None
    cut = rdma_parsers.parse_ibv_devinfo(verbose("eRDMA (0)")).incomplete
    assert cut == "dev: port 1 has no physical state (output cut short?)"


def test_whole_samples_are_not_incomplete(fixture_text):
    for name, parse in (
        ("erdma-two-devices.txt", rdma_parsers.parse_ibv_devinfo),
        ("erdma-mac-named-verbose.txt", rdma_parsers.parse_ibv_devinfo),
        ("published-irdma1-e810-v.txt", rdma_parsers.parse_ibv_devinfo),
        ("published-cx6dx-rocep61s0f1-v.txt", rdma_parsers.parse_ibv_devinfo),
        ("published-mofed-cx4lx-mlx5_3-v.txt", rdma_parsers.parse_ibv_devinfo),
        ("published-rxe0-v.txt", rdma_parsers.parse_ibv_devinfo),
        ("ibstat-two-ports.txt", rdma_parsers.parse_ibstat),
        ("rdma-link-erdma.txt", rdma_parsers.parse_rdma_link),
        ("rdma-link-erdma.json", rdma_parsers.parse_rdma_link),
    ):
        result = parse(fixture_text("rdma", name))
        assert result.devices and result.incomplete is None, name


def test_terminal_colour_codes_are_stripped_before_parsing():
    # the escapes `nvidia-smi topo -m` prints (samples/nvidia_smi), here around a state
    files = {p.name: p for p in corpus_files("ibv_devinfo")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["erdma-h20-stepmesh-pr32-erdma_0-block.txt"].read_text()
    coloured = text.replace("PORT_ACTIVE (4)", "\x1b[32mPORT_ACTIVE (4)\x1b[0m")
    assert coloured != text
    result = rdma_parsers.parse_ibv_devinfo(coloured)
    assert result.device("erdma_0").port(1).state == "ACTIVE" and not result.problems


def test_ibv_devinfo_is_parsed_once_per_output_text():
    text = "hca_id:\terdma_0\n\ttransport:\t\t\tInfiniBand (0)\n"
    assert rdma_parsers.parse_ibv_devinfo(text) is rdma_parsers.parse_ibv_devinfo(text)


@pytest.mark.parametrize("port", ["NaN", "Infinity", '"1"', "null", "true"])
def test_rdma_link_json_port_not_an_integer_is_a_problem_never_a_raise(fixture_text, port):
    text = fixture_text("rdma", "rdma-link-erdma.json").replace('"port":1', f'"port":{port}', 1)
    found = rdma_parsers.parse_rdma_link(text)
    assert [d.name for d in found.devices] == ["erdma_1"]
    assert any("unreadable JSON entry" in p for p in found.problems)
