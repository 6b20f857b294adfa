"""The emulated tools of the lab nodes: their install and each node's device state.

`install_tools` copies the tools (`ibv_devinfo`, `rdma`, perftest's `ib_write_bw` and
`ib_write_lat`, nccl-tests' `all_reduce_perf`, `nvidia-smi`, `ethtool -i` with the `dmesg` and
`journalctl -k` that show its XIDs, with their shared modules) into
`<state>/bin` as executables; each node's sshd bind-mounts that folder over
`/usr/local/sbin` in its private mount namespace, so they resolve to the emulations in
SSH sessions on lab nodes only (and for ranks Open MPI starts there). `write_rdma_state`
writes the devices they report: one ERI per node, two with `lab up --eris 2` or
`set_eris` (opt-in, since the lab profile and the static suite expect one).
"""

from __future__ import annotations

import ast
import ipaddress
import json
import os
import shutil
import sys
from pathlib import Path

from pytest_hpcnet.lab import links
from pytest_hpcnet.lab.host_view import write_host_view
from pytest_hpcnet.lab.inventory_file import write_inventory
from pytest_hpcnet.lab.state import MAX_NODES_TWO_ERIS, LabNode, LabState, node_address, node_mac

TOOLS_DIR = Path(__file__).with_name("tools")
NODE_BIN = "/usr/local/sbin"
"""Where the tools appear on a node: on root's PATH before /usr/bin, empty on the host."""
SHARED_PREFIX = "hpcnet_lab_"
"""A tools-folder module the tools import (copied beside them); every other `<name>.py` there is
a tool, installed as the commands its `COMMANDS` tuple names (default: `<name>`)."""
TORCH_MODULE = "hpcnet_lab_torch.py"
"""The emulated `torch`, installed as a package on the nodes' PYTHONPATH, not beside the tools."""


def tool_commands(source: Path) -> tuple[str, ...]:
    """The commands a tool file installs as: its module-level `COMMANDS` tuple, else its stem."""
    for statement in ast.parse(source.read_text()).body:
        if isinstance(statement, ast.Assign) and [
            getattr(t, "id", None) for t in statement.targets
        ] == ["COMMANDS"]:
            return tuple(ast.literal_eval(statement.value))
    return (source.stem,)


def lab_tools() -> dict[str, str]:
    """Each emulated command and the tools-folder file that implements it."""
    return {
        command: source.name
        for source in sorted(TOOLS_DIR.glob("*.py"))
        if not source.name.startswith(SHARED_PREFIX)
        for command in tool_commands(source)
    }


def shared_modules() -> tuple[str, ...]:
    """The modules the tools import, copied beside them."""
    return tuple(
        p.name for p in sorted(TOOLS_DIR.glob(f"{SHARED_PREFIX}*.py")) if p.name != TORCH_MODULE
    )


PYLIB = "pylib"
"""On lab nodes' PYTHONPATH (`/usr/local/sbin/pylib`, sshd's SetEnv): the emulated `torch`."""
TORCH_VERSION = "2.5.1+hpcnet.lab.emulation"
STATE_POINTER = ".hpcnet-lab-state"
VENDOR_ID = "0x1ded"
VENDOR_PART_ID = 4223
IB_MAX_MTU = 4096
PCIE_LINK = {
    "current_link_speed": "16.0 GT/s PCIe",
    "max_link_speed": "16.0 GT/s PCIe",
    "current_link_width": 16,
    "max_link_width": 16,
}
"""Each emulated ERI's PCIe link in sysfs (Gen4 x16, at its maximum; the real kernel format)."""


def node_python() -> str:
    """The interpreter of the node tools and services: the system python3 when present."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def install_tools(state: LabState) -> Path:
    """Write the emulated tools into `<state>/bin`; returns the folder."""
    folder = state.bin_dir
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shebang = f"#!{node_python()} -SE\n"  # no site: standard library only, 3 ms less a call
    for command, source in lab_tools().items():
        target = folder / command
        target.write_text(shebang + (TOOLS_DIR / source).read_text())
        os.chmod(target, 0o755)
    for module in shared_modules():
        shutil.copyfile(TOOLS_DIR / module, folder / module)
    (folder / STATE_POINTER).write_text(f"{state.root}\n")
    install_torch(folder / PYLIB)
    return folder


def install_torch(pylib: Path) -> None:
    """The emulated `torch` package (`tools/hpcnet_lab_torch.py`) with its package metadata,
    so the facts' engine probe finds it as it finds a pip-installed torch."""
    package = pylib / "torch"
    package.mkdir(parents=True)
    shutil.copyfile(TOOLS_DIR / TORCH_MODULE, package / "__init__.py")
    dist = pylib / f"torch-{TORCH_VERSION}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {TORCH_VERSION}\n"
        "Summary: hpcnet lab emulation of PyTorch (no GPU, no math)\n"
    )


def node_guid(mac: str) -> str:
    """The EUI-64 GUID of a MAC as erdma derives it: 00:16:3e:.. -> 0216:3eff:fe..:...."""
    octets = [int(x, 16) for x in mac.split(":")]
    octets[0] ^= 0x02
    eui = [*octets[:3], 0xFF, 0xFE, *octets[3:]]
    return ":".join(f"{eui[i]:02x}{eui[i + 1]:02x}" for i in range(0, 8, 2))


def rdma_devices(node: LabNode, eris: int = 1) -> list[dict]:
    """The node's eRDMA devices (`eris` of them) as its faults leave them.

    `no-rdma` removes them, `port-down` downs every port, `eri-down` one device's port;
    `gid-shift` puts an extra IPv6 GID before the IPv4 one on one device,
    `eri-pcie-downgrade` runs one device's PCIe link at x8 of x16. GIDs are
    compat-mode style (docs/sources.md): [0] link-local, [1] ::ffff:<address>.
    An ERI is an ENI: erdma_1 sits on the secondary ENI `eth1`, its GUID and GIDs from
    eth1's MAC and address (a node recorded without one keeps it on eth0).
    """
    if "no-rdma" in node.faults:
        return []
    devices = []
    for i in range(max(1, eris)):
        name = f"erdma_{i}"
        own = i == 1 and bool(node.secondary_address)
        netdev = "eth1" if own else "eth0"
        mac, address = (
            (node.secondary_mac, node.secondary_address) if own else (node.mac, node.address)
        )
        guid = node_guid(mac or "00:16:3e:00:00:00")
        down = "port-down" in node.faults or node.faults.get("eri-down") == name
        gids = [str(ipaddress.IPv6Address(f"fe80::{guid}")), f"::ffff:{address}"]
        if node.faults.get("gid-shift") == name:
            gids.insert(1, f"2001:db8:18::{i + 1:x}")
        port = {
            "port": 1,
            "state": "DOWN" if down else "ACTIVE",
            "physical_state": "DISABLED" if down else "LINK_UP",
            "max_mtu": IB_MAX_MTU,
            "active_mtu": IB_MAX_MTU,
            "link_layer": "Ethernet",
            "netdev": netdev,
            "gids": gids,
        }
        devices.append(
            {
                "name": name,
                "transport": "eRDMA (0)",
                "fw_ver": "0.2.0",
                "node_guid": guid,
                "sys_image_guid": guid,
                "vendor_id": VENDOR_ID,
                "vendor_part_id": VENDOR_PART_ID,
                "hw_ver": "0x0",
                "numa_node": i,
                "pcie": dict(PCIE_LINK, current_link_width=8)
                if node.faults.get("eri-pcie-downgrade") == name
                else dict(PCIE_LINK),
                "ports": [port],
            }
        )
    return devices


def write_rdma_state(state: LabState, node: LabNode) -> Path:
    """Write `<state>/nodes/<node>/rdma.json`, read by the tools on every call."""
    path = state.rdma_file(node.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    devices = rdma_devices(node, state.eris)
    tmp.write_text(json.dumps({"node": node.name, "devices": devices}, indent=2))
    tmp.replace(path)
    write_sysfs(path.parent / "sys", devices)
    write_dmi(path.parent / "sys")
    write_host_view(state, node, [d["name"] for d in devices])
    return path


BIOS = {"bios_vendor": "Alibaba Cloud", "bios_version": "0.0.0", "bios_date": "04/01/2014"}
"""The lab's BIOS in sysfs dmi (lab values; the firmware probe reads vendor and version)."""


def write_dmi(root: Path) -> None:
    """`class/dmi/id` under the node's `HPCNET_SYSFS`: its BIOS vendor, version and date."""
    dmi = root / "class/dmi/id"
    dmi.mkdir(parents=True, exist_ok=True)
    for key, value in BIOS.items():
        (dmi / key).write_text(f"{value}\n")


def write_sysfs(root: Path, devices: list[dict]) -> None:
    """The part of sysfs the eRDMA identity and driver probes read, under `root` (the
    node's `HPCNET_SYSFS`): each device bound to `erdma` with Alibaba's PCI id, its NUMA
    node, PCIe link, netdev and nominal port rate; the module's version and `compat_mode=Y`. No
    `hw_counters`: the counters come from the emulated `rdma statistic`."""
    if root.exists():
        shutil.rmtree(root)
    if not devices:
        root.mkdir(parents=True)
        return
    driver = root / "bus/pci/drivers/erdma"
    driver.mkdir(parents=True)
    (root / "module/erdma/parameters").mkdir(parents=True)
    (root / "module/erdma/version").write_text("0.2.37\n")
    (root / "module/erdma/parameters/compat_mode").write_text("Y\n")
    for dev in devices:
        base = root / "class/infiniband" / dev["name"]
        (base / "device/net" / dev["ports"][0]["netdev"]).mkdir(parents=True)
        (base / "ports/1").mkdir(parents=True)
        (base / "device/driver").symlink_to(driver)
        (base / "device/vendor").write_text(f"{VENDOR_ID}\n")
        (base / "device/device").write_text(f"0x{VENDOR_PART_ID:04x}\n")
        (base / "device/numa_node").write_text(f"{dev['numa_node']}\n")
        for key, value in dev.get("pcie", PCIE_LINK).items():
            (base / "device" / key).write_text(f"{value}\n")
        (base / "ports/1/rate").write_text("100 Gb/sec (4X EDR)\n")


def set_eris(state_dir: Path, eris: int) -> int:
    """Give every node of a running lab `eris` devices (1 or 2); returns the previous count.

    Opt-in: the lab profile and the static suite expect one device, so `lab up` makes one
    unless `--eris 2` is given; tests that need two switch a running lab and switch back.
    Two ERIs give every node its secondary ENI `eth1` (erdma_1's netdev); one removes it.
    The lab inventory is rewritten with the new `expect.erdma.eris`.
    """
    from pytest_hpcnet.lab.state import locked

    if eris not in (1, 2):
        raise ValueError(f"eris must be 1 or 2, got {eris}")
    with locked(state_dir):
        state = LabState.load(state_dir)
        if state is None:
            raise ValueError(f"no lab at {state_dir}")
        if eris == 2 and len(state.nodes) > MAX_NODES_TWO_ERIS:
            raise ValueError(
                f"two ERIs take at most {MAX_NODES_TWO_ERIS} nodes (the lab has "
                f"{len(state.nodes)}: the second ENIs' addresses stop there)"
            )
        was, state.eris = state.eris, eris
        for index, node in enumerate(state.nodes):
            set_secondary_eni(node, index, eris == 2)
            write_rdma_state(state, node)
        state.save()
        _rewrite_inventory(state)
    return was


def _rewrite_inventory(state: LabState) -> None:
    """The lab inventory again, with `expect.erdma.eris` the new count (and the control
    plane's ERIs with it)."""
    if Path(state.inventory).exists():
        write_inventory(state)


def set_secondary_eni(node: LabNode, index: int, present: bool) -> None:
    """Give the index-th node its secondary ENI `eth1` (own MAC and address, the node's
    MTU), or remove it."""
    node.secondary_address = node.secondary_address or node_address(index, nic=1)
    node.secondary_mac = node.secondary_mac or node_mac(index, nic=1)
    if not links.is_live(node):
        return
    if present:
        links.create_secondary_link(node, node.mtu)
    else:
        links.remove_secondary_link(node)


GPU_BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
"""The PCI buses of a lab node's eight GPUs (as `tools/hpcnet_lab_gpu.py` BUS_IDS)."""
XID_DETAILS = {
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.",
    79: "GPU has fallen off the bus.",
    94: "pid=4242, name=python3, Contained ECC error.",
    95: "pid=4242, name=python3, Uncontained ECC error.",
}


def kernel_log_file(state: LabState, node: LabNode) -> Path:
    """The node's kernel messages after boot, read by the emulated `dmesg`/`journalctl -k`."""
    return state.node_dir(node.name) / "kernel.log"


def log_xid(state: LabState, node: LabNode, xid: int, slot: int = 3) -> int:
    """Append an `NVRM: Xid` line for GPU `slot`; returns the log's size before it."""
    path = kernel_log_file(state, node)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size if path.exists() else 0
    detail = XID_DETAILS.get(xid, "pid=4242, name=python3, Ch 00000008")
    bus = f"PCI:0000:{GPU_BUS_IDS[slot].lower()}:00"
    line = f"[ 4242.{xid:06d}] NVRM: Xid ({bus}): {xid}, {detail}\n"
    with path.open("a") as handle:
        handle.write(line)
    return size


SXID_SWITCH = ("nvidia-nvswitch3", "0000:04:00.0")
"""The NVSwitch an injected SXid names, and its PCI address."""


def log_sxid(state: LabState, node: LabNode, sxid: int, link: int = 44) -> int:
    """Append one NVSwitch SXid event as the driver logs it: a `Data` line, the severity line
    (`Non-fatal, Link N ...`) and a `Severity 0 Engine instance` line, the layout of an
    NVIDIA driver 570.195.03 log (NVIDIA/nvtrust issue #124); returns the log's size before."""
    path = kernel_log_file(state, node)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size if path.exists() else 0
    switch, pci = SXID_SWITCH
    head = f"{switch}: SXid (PCI:{pci}): {sxid},"
    data = ", ".join(f"0x{v:08x}" for v in (link, link, 0, link, 0x80005302, 0, 0, 0, 0))
    lines = (
        f"{head} Data {{{data}}}",
        f"{head} Non-fatal, Link {link:02d} Minion Link DLREQ interrupt",
        f"{head} Severity 0 Engine instance {link:02d} Sub-engine instance 00",
    )
    with path.open("a") as handle:
        for i, line in enumerate(lines):
            handle.write(f"[ 4243.{sxid % 1000 * 10 + i:06d}] {line}\n")
    return size


def truncate_kernel_log(state: LabState, node: LabNode, size: int) -> None:
    """Cut the node's kernel log back to `size` bytes (what healing an XID restores)."""
    path = kernel_log_file(state, node)
    if path.exists():
        with path.open("r+") as handle:
            handle.truncate(min(size, path.stat().st_size))
