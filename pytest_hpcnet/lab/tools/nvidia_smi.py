"""hpcnet lab emulation of `nvidia-smi`: not the real tool, and no GPU.

Prints the node's eight emulated H200 (see hpcnet_lab_gpu.py) in the formats recorded
on a real H200 (samples/nvidia_smi): `--query-gpu=F,... --format=csv[,noheader][,nounits]`
(header `memory.total [MiB]`, values `143771 MiB`, `[N/A]`; an unknown field is refused as
the real tool refuses it), repeated every N ms with `-lms N` (or N s with `-l N`) until
killed, at most LOOP_MAX times, `topo -m` (ANSI-underlined header, the node's eRDMA devices
as NICs, `NIC Legend`), `nvlink -s` / `-e` (the published H100 SXM5 formats, 18 links each),
`-L` and `-q [-d ...]` (only the recorded header, with `CUDA Version`, and each GPU's
VBIOS, InfoROM image, GSP firmware (the driver's version), ECC mode, `Compute Mode` and
`Fabric` State/Status: Completed/Success as on a registered HGX GPU, `In
Progress`/`N/A` for that GPU with fault `fabric-fail`), `--query-compute-apps=F,...
--format=csv` (`pid, process_name, used_gpu_memory [MiB]`: the processes holding a GPU) and
`-r`/`--gpu-reset` [`-i N`] (`GPU 00000000:1A:00.0 was successfully reset.`, or the `In use
by another client` refusal, exit 255, while a process holds one; both recorded in
NVIDIA/NVSentinel#1690). Faults change what it prints; nothing else is emulated.
"""

from __future__ import annotations

import re
import sys
import time

import hpcnet_lab_gpu as gpu
import hpcnet_lab_rdma as lab

COMMANDS = ("nvidia-smi",)
"""The commands this file is installed as (`lab.emulation.lab_tools`)."""

UNIT = re.compile(r"^\d+(?:\.\d+)? (W|MiB|MHz|%)$")
"""A value with a unit (`700.00 W`): its field's header names the unit (`power.limit [W]`)."""


def units(fields: list[str], rows: list[dict[str, str]]) -> dict[str, str]:
    """Each queried field's unit, as its values print it on any GPU."""
    found: dict[str, str] = {}
    for field in fields:
        for row in rows:
            m = UNIT.match(row[field])
            if m:
                found[field] = m.group(1)
                break
    return found


LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""  # noqa: E501  (the recorded legend, verbatim)


def query(fields: list[str], options: set[str]) -> int:
    """`--query-gpu`: one CSV line per GPU, header first unless `noheader`."""
    rows = gpu.gpus()
    if not rows:
        sys.stdout.write("No devices were found\n")
        return 6
    for field in fields:
        if field not in rows[0]:
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    unit = units(fields, rows)
    if "noheader" not in options:
        heads = [f"{f} [{unit[f]}]" if f in unit else f for f in fields]
        sys.stdout.write(", ".join(heads) + "\n")
    for row in rows:
        values = [row[f] for f in fields]
        if "nounits" in options:
            values = [
                v.split(" ")[0] if f in unit else v for f, v in zip(fields, values, strict=True)
            ]
        sys.stdout.write(", ".join(values) + "\n")
    return 0


LOOP_MAX = 7200
"""The most samples one looping call prints (an hour at -lms 500): every loop is bounded."""


def loop(fields: list[str], options: set[str], every_s: float) -> int:
    """`--query-gpu ... -lms N`: the query again every `every_s` until killed (the header
    once, as the real tool prints it)."""
    for i in range(LOOP_MAX):
        status = query(fields, options if i == 0 else options | {"noheader"})
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return 0
        if status != 0:
            return status
        time.sleep(every_s)
    return 0


def topo() -> int:
    """`topo -m`: GPUs 0-3 and even NICs on NUMA 0, the rest on NUMA 1."""
    rows = gpu.gpus()
    names = [f"GPU{r['index']}" for r in rows]
    slots = [gpu.BUS_IDS.index(r["pci.bus_id"][9:11]) for r in rows]
    numa = {n: (0 if s < 4 else 1) for n, s in zip(names, slots, strict=True)}
    nics = [d["name"] for d in lab.load_devices()]
    for i, _ in enumerate(nics):
        numa[f"NIC{i}"] = i % 2
    columns = names + [f"NIC{i}" for i in range(len(nics))]

    def link(a: str, b: str) -> str:
        if a == b:
            return " X "
        if a.startswith("GPU") and b.startswith("GPU"):
            return "NV18"
        return "NODE" if numa[a] == numa[b] else "SYS"

    heads = [*columns, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    out = ["\t\x1b[4m" + "\t".join(heads) + "\x1b[0m"]
    for name in names:
        cpus = "0-47,96-143" if numa[name] == 0 else "48-95,144-191"
        cells = [link(name, c) for c in columns]
        out.append("\t".join([name, *cells, cpus, str(numa[name]), "", "N/A"]))
    for i in range(len(nics)):
        out.append("\t".join([f"NIC{i}", *(link(f"NIC{i}", c) for c in columns)]))
    text = "\n".join(out) + "\n" + LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(f"  NIC{i}: {n}\n" for i, n in enumerate(nics))
    sys.stdout.write(text + "\n")
    return 0


CUDA = "13.0"
"""The recorded driver's CUDA version (samples/nvidia_smi/smi-q.txt)."""


def query_log(displays: bool = False) -> int:
    """`-q`: the recorded header, then each GPU with its firmware and compute mode only
    (`displays`: `-q -d ...`, which prints no firmware)."""
    rows = gpu.gpus()
    driver = rows[0]["driver_version"] if rows else gpu.DRIVER

    def item(key: str, value: str, indent: str = "") -> str:
        return f"{indent}{key:<{55 - len(indent)}}: {value}\n"

    out = "\n==============NVSMI LOG==============\n\n"
    out += item("Timestamp", time.strftime("%a %b %d %H:%M:%S %Y"))
    out += item("Driver Version", driver) + item("CUDA Version", CUDA) + "\n"
    out += item("Attached GPUs", str(len(rows)))
    stuck = gpu._fault_gpu(gpu.node.faults(), "fabric-fail")
    for row in rows:
        slot = gpu.BUS_IDS.index(row["pci.bus_id"][9:11])
        state, status = ("In Progress", "N/A") if slot == stuck else ("Completed", "Success")
        out += f"GPU {row['pci.bus_id']}\n"
        if not displays:
            out += item("VBIOS Version", row["vbios_version"], "    ")
            out += "    Inforom Version\n" + item("Image Version", gpu.INFOROM_IMAGE, " " * 8)
            out += item("OEM Object", "2.1", " " * 8)
            out += item("GSP Firmware Version", driver, "    ")
            out += "    ECC Mode\n" + item("Current", row["ecc.mode.current"], " " * 8)
            out += item("Pending", row["ecc.mode.current"], " " * 8)
        out += item("Compute Mode", "Default", "    ")
        out += "    Fabric\n" + item("State", state, " " * 8) + item("Status", status, " " * 8)
        out += "\n"
    sys.stdout.write(out)
    return 0


NVLINKS = 18
NVLINK_GBS = "26.562"
"""Per link, as the recorded H100 SXM5 (NVLink 4) prints it; the H200 SXM has 18 links."""


def nvlink(flag: str) -> int:
    """`nvlink -s` (each link's speed, `<inactive>` for a down one) or `nvlink -e` (replay,
    recovery and CRC error counters per link); faults `nvlink-down` (links 4 and 5 of that
    GPU inactive) and `nvlink-errors` (link 2 of that GPU counting errors)."""
    faults = gpu.node.faults()
    down = gpu._fault_gpu(faults, "nvlink-down")
    noisy = gpu._fault_gpu(faults, "nvlink-errors")
    out = []
    for row in gpu.gpus():
        slot = gpu.BUS_IDS.index(row["pci.bus_id"][9:11])
        out.append(f"GPU {row['index']}: {row['name']} (UUID: {row['uuid']})")
        for link in range(NVLINKS):
            if flag == "-s":
                speed = "<inactive>" if slot == down and link in (4, 5) else f"{NVLINK_GBS} GB/s"
                out.append(f"\t Link {link}: {speed}")
                continue
            counts = (40, 1, 12) if slot == noisy and link == 2 else (0, 0, 0)
            for what, count in zip(("Replay", "Recovery", "CRC"), counts, strict=True):
                out.append(f"\t Link {link}: {what} Errors: {count}")
            out.append("")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


APP_FIELDS = {
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "gpu_uuid": "gpu_uuid",
    "gpu_bus_id": "gpu_bus_id",
    "gpu_name": "gpu_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
}
"""`--query-compute-apps` fields and their CSV headers (`used_memory` prints as
`used_gpu_memory [MiB]`, as the real tool does)."""
HELD_MIB = 6265


def selected(argv: list[str]) -> list[dict[str, str]] | None:
    """The GPUs `-i N[,M]` names (by index, UUID or bus id), all without `-i`; None when one
    named is not there."""
    rows = gpu.gpus()
    for i, arg in enumerate(argv):
        if arg in ("-i", "--id") and i + 1 < len(argv):
            wanted = argv[i + 1].split(",")
            found = [r for r in rows if {r["index"], r["uuid"], r["pci.bus_id"]} & set(wanted)]
            return found if len(found) == len(wanted) else None
    return rows


def _slot(row: dict[str, str]) -> int:
    return gpu.BUS_IDS.index(row["pci.bus_id"][9:11])


def compute_apps(fields: list[str], options: set[str], argv: list[str]) -> int:
    """`--query-compute-apps`: one CSV line per process holding a GPU (header only when none)."""
    for field in fields:
        if field not in APP_FIELDS:
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    rows = selected(argv)
    if rows is None:
        sys.stdout.write("No devices were found\n")
        return 6
    if "noheader" not in options:
        sys.stdout.write(", ".join(APP_FIELDS[f] for f in fields) + "\n")
    held = gpu.holders()
    for row in rows:
        if _slot(row) not in held:
            continue
        pid, name = held[_slot(row)]
        memory = str(HELD_MIB) if "nounits" in options else f"{HELD_MIB} MiB"
        values = {
            "pid": str(pid),
            "process_name": name,
            "name": name,
            "gpu_uuid": row["uuid"],
            "gpu_bus_id": row["pci.bus_id"],
            "gpu_name": row["name"],
            "used_memory": memory,
            "used_gpu_memory": memory,
        }
        sys.stdout.write(", ".join(values[f] for f in fields) + "\n")
    return 0


IN_USE = (
    "{count} device is currently being used by one or more other processes (e.g. Fabric "
    "Manager, CUDA application, graphics application such as an X server, or a monitoring "
    "application such as another instance of nvidia-smi). Please first kill all processes "
    "using this device and all compute applications running in the system.\n"
)


def gpu_reset(argv: list[str]) -> int:
    """`-r` / `--gpu-reset` [`-i N`]: every GPU (or those named) reset, each as `GPU <bus id>
    was successfully reset.`; refused, exit 255, while a compute process holds one of them
    (`In use by another client`). A reset clears its GPU's reset-clearable faults."""
    rows = selected(argv)
    if rows is None:
        sys.stdout.write("No devices were found\n")
        return 6
    held = gpu.holders()
    refused = [r for r in rows if _slot(r) in held]
    if refused:
        out = "The following GPUs could not be reset:\n"
        out += "".join(f"  GPU {r['pci.bus_id']}: In use by another client\n" for r in refused)
        sys.stdout.write(out + "\n" + IN_USE.format(count=len(refused)))
        return 255
    gpu.reset({_slot(r) for r in rows})
    for row in rows:
        sys.stdout.write(f"GPU {row['pci.bus_id']} was successfully reset.\n")
    return 0


def main(argv: list[str]) -> int:
    """Run like `nvidia-smi`; returns the exit status."""
    if argv[:2] == ["topo", "-m"]:
        return topo()
    if argv[:1] == ["nvlink"] and argv[1:2] in (["-s"], ["-e"]):
        return nvlink(argv[1])
    if argv[:1] == ["-q"]:
        return query_log(displays="-d" in argv)
    if argv == ["-L"]:
        for row in gpu.gpus():
            sys.stdout.write(f"GPU {row['index']}: {row['name']} (UUID: {row['uuid']})\n")
        return 0
    if "-r" in argv or "--gpu-reset" in argv:
        return gpu_reset(argv)
    fields, apps, options, every_s = None, None, None, None
    for i, arg in enumerate(argv):
        if arg in ("-lms", "-l") and i + 1 < len(argv) and argv[i + 1].isdigit():
            every_s = int(argv[i + 1]) / (1000.0 if arg == "-lms" else 1.0)
        if arg.startswith("--query-gpu="):
            fields = [f.strip() for f in arg.split("=", 1)[1].split(",") if f.strip()]
        elif arg.startswith("--query-compute-apps="):
            apps = [f.strip() for f in arg.split("=", 1)[1].split(",") if f.strip()]
        elif arg.startswith("--format="):
            options = set(arg.split("=", 1)[1].split(","))
    if apps and options is not None and "csv" in options:
        return compute_apps(apps, options, argv)
    if fields and options is not None and "csv" in options:
        if every_s is None:
            return query(fields, options)
        return loop(fields, options, max(every_s, 0.01))
    usage = (
        "Usage: nvidia-smi --query-gpu=F,... --format=csv[,noheader][,nounits] | "
        "--query-compute-apps=F,... --format=csv | -r [-i N] | topo -m | -L"
    )
    sys.stdout.write(__doc__.splitlines()[0] + "\n" + usage + "\n")
    return 0 if argv in ([], ["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
