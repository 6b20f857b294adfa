"""hpcnet lab emulation of iproute2 `rdma` (only `rdma link`): not the real tool.

`rdma [-j] [-p] [-d] link [show [DEV[/PORT]]]` prints the node's emulated eRDMA ports in
the current iproute2 format (`link erdma_0/1 state ACTIVE physical_state LINK_UP netdev
eth0 `, a trailing space as iproute2 prints it), or JSON with -j. `rdma [-j] statistic
[show [link DEV[/PORT]]]` prints each port's hw counters (`link erdma_0/1 hw_tx_bytes_cnt
0 ...`). Other objects (`dev`, `res`, ...) are not emulated.
"""

from __future__ import annotations

import json
import sys

import hpcnet_lab_rdma as lab

USAGE = (
    "Usage: rdma [ OPTIONS ] OBJECT { COMMAND | help }\n"
    "       rdma [ -f[orce] ] -b[atch] filename\n"
    "where  OBJECT := { dev | link | resource | system | statistic | help }\n"
    "       OPTIONS := { -V[ersion] | -d[etails] | -j[son] | -p[retty] | -r[aw]}\n"
)


def _rows(selector: str | None) -> list[dict] | str:
    """The ports to show, or the error message of the real tool."""
    rows = []
    for index, device in enumerate(lab.load_devices()):
        for port in device.get("ports", []):
            rows.append({"ifindex": index, "ifname": device["name"], **port})
    if not selector:
        return rows
    name, _, port = selector.partition("/")
    rows = [r for r in rows if r["ifname"] == name]
    if not rows:
        return "Wrong device name"
    if port:
        if not port.isdigit():
            return "Wrong port number"
        rows = [r for r in rows if int(r.get("port", 1)) == int(port)]
        if not rows:
            return "Wrong port number"
    return rows


def link_text(rows: list[dict], details: bool) -> str:
    """`rdma link show` lines."""
    out = []
    for r in rows:
        line = (
            f"link {r['ifname']}/{r.get('port', 1)} state {r.get('state', 'ACTIVE')} "
            f"physical_state {r.get('physical_state', 'LINK_UP')} "
        )
        if r.get("netdev"):
            line += f"netdev {r['netdev']} "
            if details:
                line += f"netdev_index {r.get('netdev_index', 0)} "
        out.append(line + "\n")
    return "".join(out)


def link_json(rows: list[dict], pretty: bool) -> str:
    """`rdma -j link show` output."""
    items = []
    for r in rows:
        item = {
            "ifindex": r["ifindex"],
            "ifname": r["ifname"],
            "port": int(r.get("port", 1)),
            "state": r.get("state", "ACTIVE"),
            "physical_state": r.get("physical_state", "LINK_UP"),
        }
        if r.get("netdev"):
            item["netdev"] = r["netdev"]
            item["netdev_index"] = int(r.get("netdev_index", 0))
        items.append(item)
    if pretty:
        return json.dumps(items, indent=4) + "\n"
    return json.dumps(items, separators=(",", ":")) + "\n"


def statistic(rest: list[str], as_json: bool) -> int:
    """`rdma statistic [show [link DEV[/PORT]]]`: the emulated hw counters per port."""
    if rest and rest[0] in ("show", "list"):
        rest = rest[1:]
    if rest and rest[0] == "link":
        rest = rest[1:]
    rows = _rows(rest[0] if rest else None)
    if isinstance(rows, str):
        sys.stderr.write(rows + "\n")
        return 1
    counters = lab.read_counters()
    items = [
        {"ifindex": r["ifindex"], "ifname": r["ifname"], "port": int(r.get("port", 1)),
         **counters.get(r["ifname"], {})}
        for r in rows
    ]  # fmt: skip
    if as_json:
        sys.stdout.write(json.dumps(items, separators=(",", ":")) + "\n")
        return 0
    for item in items:
        shown = {k: v for k, v in item.items() if k not in ("ifindex", "ifname", "port")}
        values = " ".join(f"{k} {v}" for k, v in shown.items())
        sys.stdout.write(f"link {item['ifname']}/{item['port']} {values} \n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run like `rdma`; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = pretty = details = False
    while args and args[0].startswith("-"):
        flag = args.pop(0).lstrip("-")
        if flag in ("h", "help"):
            sys.stdout.write(__doc__.splitlines()[0] + "\n" + USAGE)
            return 0
        if "json".startswith(flag):
            as_json = True
        elif "pretty".startswith(flag):
            pretty = as_json = True
        elif "details".startswith(flag):
            details = True
        else:
            sys.stderr.write(f'Option "-{flag}" is unknown, try "rdma -help".\n')
            return 1
    if args and args[0] in ("statistic", "stat", "s"):
        return statistic(args[1:], as_json)
    if not args or args[0] not in ("link", "lin", "li", "l"):
        obj = args[0] if args else ""
        if obj in ("", "help"):
            sys.stdout.write(USAGE)
            return 0
        sys.stderr.write(f'{__doc__.splitlines()[0]}\nObject "{obj}" is not emulated.\n')
        return 1
    rest = args[1:]
    if rest and rest[0] in ("show", "list", "sh", "s"):
        rest = rest[1:]
    elif rest and rest[0] != "help":
        sys.stderr.write(f'Command "{rest[0]}" is unknown, try "rdma link help".\n')
        return 1
    if rest and rest[0] == "help":
        sys.stdout.write("Usage: rdma link show [DEV/PORT_INDEX]\n")
        return 0
    rows = _rows(rest[0] if rest else None)
    if isinstance(rows, str):
        sys.stderr.write(rows + "\n")
        return 1
    sys.stdout.write(link_json(rows, pretty) if as_json else link_text(rows, details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
