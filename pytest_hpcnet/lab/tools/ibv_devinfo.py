"""hpcnet lab emulation of `ibv_devinfo` (rdma-core): not the real tool.

Prints the node's emulated eRDMA devices (see hpcnet_lab_rdma.py) byte for byte in the
layout of rdma-core's devinfo.c: `hca_id:`, tab-aligned fields, one block per port and a
blank line after each port; "No IB devices found" on stderr and exit 255 without devices.
Options as the real tool: -d/--ib-dev, -i/--ib-port, -l/--list, -v/--verbose (of the
verbose-only attributes only the GID table is emulated, in rdma-core's `GID[  1]:
::ffff:198.18.0.11, RoCE v2` form).
"""

from __future__ import annotations

import argparse
import sys

import hpcnet_lab_rdma as lab

PORT_STATES = {"NOP": 0, "DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}


def usage(argv0: str) -> str:
    """The real tool's usage text."""
    return (
        f"Usage: {argv0}             print the ca attributes\n\n"
        "Options:\n"
        "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"
        "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n"
        "  -l, --list             print only the IB devices names\n"
        "  -v, --verbose          print all the attributes of the IB device(s)\n"
    )


def _mtu(value: int) -> str:
    return f"{value} ({lab.MTU_CODES.get(value, 0)})"


def device_block(device: dict, only_port: int = 0, verbose: bool = False) -> str:
    """One device as `ibv_devinfo` prints it."""
    ports = device.get("ports", [])
    out = [
        f"hca_id:\t{device['name']}",
        f"\ttransport:\t\t\t{device.get('transport', 'eRDMA (0)')}",
        f"\tfw_ver:\t\t\t\t{device.get('fw_ver', '0.2.0')}",
        f"\tnode_guid:\t\t\t{device['node_guid']}",
        f"\tsys_image_guid:\t\t\t{device.get('sys_image_guid', device['node_guid'])}",
        f"\tvendor_id:\t\t\t{device.get('vendor_id', '0x1ded')}",
        f"\tvendor_part_id:\t\t\t{device.get('vendor_part_id', 4223)}",
        f"\thw_ver:\t\t\t\t{device.get('hw_ver', '0x0')}",
        f"\tphys_port_cnt:\t\t\t{len(ports)}",
    ]
    for port in ports:
        number = int(port.get("port", 1))
        if only_port and number != only_port:
            continue
        state = port.get("state", "ACTIVE")
        out += [
            f"\t\tport:\t{number}",
            f"\t\t\tstate:\t\t\tPORT_{state} ({PORT_STATES.get(state, 0)})",
            f"\t\t\tmax_mtu:\t\t{_mtu(int(port.get('max_mtu', 4096)))}",
            f"\t\t\tactive_mtu:\t\t{_mtu(int(port.get('active_mtu', 4096)))}",
            "\t\t\tsm_lid:\t\t\t0",
            "\t\t\tport_lid:\t\t0",
            "\t\t\tport_lmc:\t\t0x00",
            f"\t\t\tlink_layer:\t\t{port.get('link_layer', 'Ethernet')}",
        ]
        if verbose:
            gids = enumerate(port.get("gids", []))
            out += [f"\t\t\tGID[{i:3d}]:\t\t{g}, RoCE v2" for i, g in gids]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run like `ibv_devinfo`; returns the exit status."""
    parser = argparse.ArgumentParser(prog="ibv_devinfo", add_help=False)
    parser.add_argument("-d", "--ib-dev")
    parser.add_argument("-i", "--ib-port", type=lambda v: int(v, 0))
    parser.add_argument("-l", "--list", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    args, extra = parser.parse_known_args(argv)
    if args.help or extra or (args.ib_port is not None and args.ib_port <= 0):
        sys.stdout.write(__doc__.splitlines()[0] + "\n" + usage("ibv_devinfo"))
        return 1 if args.ib_port is not None and args.ib_port <= 0 else 255
    devices = lab.load_devices()
    if args.list:
        plural = "s" if len(devices) != 1 else ""
        names = "".join(f"\t{d['name']}\n" for d in devices)
        sys.stdout.write(f"{len(devices)} HCA{plural} found:\n{names}\n")
        return 0
    if args.ib_dev:
        devices = [d for d in devices if d["name"] == args.ib_dev]
        if not devices:
            sys.stderr.write(f"IB device '{args.ib_dev}' wasn't found\n")
            return 255
    elif not devices:
        sys.stderr.write("No IB devices found\n")
        return 255
    port = args.ib_port or 0
    if port and any(port > len(d.get("ports", [])) for d in devices):
        sys.stderr.write("Invalid port requested for device\n")
        return 4
    sys.stdout.write("".join(device_block(d, port, args.verbose) for d in devices))
    return 0


if __name__ == "__main__":
    sys.exit(main())
