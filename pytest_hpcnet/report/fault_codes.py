"""docs/fault-codes.md from the registry: every fault code with its requirement, meaning,
repair class and what to do (`python -m pytest_hpcnet.report.fault_codes > docs/fault-codes.md`;
a unit test checks the page matches)."""

from __future__ import annotations

from pytest_hpcnet.requirements.registry import REPAIRS, REQUIREMENTS

HEAD = """# Fault codes

Every way a requirement fails has a stable code, declared beside the requirement in
`pytest_hpcnet/requirements/registry.py` (its `faults`), with a repair class:

- `config`: the operator fixes a setting; the node is never rebooted for it.
- `reset`: a GPU reset (`nvidia-smi -r`) where no process holds the GPU.
- `reboot`: reboot the instance.
- `replace`: a ticket to the cloud provider (`hpcnet ticket RUN NODE`, docs/repair.md).

A judge sets the code where its reason tells the cause (the Xid number, ECC uncorrected
errors against pending remaps, a port down against a device missing); any other failure of
a requirement carries its default code, the first listed under it. Every failed measurement
carries its code into `evidence.jsonl` (`measured[].code`, the record's `codes`), the
terminal's failure lines (`[HPCNET-MTU]`), JUnit (testcase property `hpcnet_fault_code`),
the metrics (`hpcnet_fault{check,subject,code,repair}`) and the certificate's findings.
A repeat of the same code on a node after its reset or reboot means `replace`.

This page is generated from the registry: `python -m pytest_hpcnet.report.fault_codes >
docs/fault-codes.md`.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The page: one table per requirement, its default code first."""
    lines = [HEAD]
    counted = {r: 0 for r in REPAIRS}
    for requirement in REQUIREMENTS:
        lines.append(f"## `{requirement.id}`: {requirement.title}\n")
        lines.append("| code | means | repair | what to do |")
        lines.append("| --- | --- | --- | --- |")
        for index, fault in enumerate(requirement.faults):
            code = f"`{fault.code}`" + (" (default)" if index == 0 else "")
            row = (code, _cell(fault.meaning), fault.repair, _cell(fault.action))
            lines.append("| " + " | ".join(row) + " |")
            counted[fault.repair] += 1
        lines.append("")
    total = sum(counted.values())
    by_class = ", ".join(f"{n} {r}" for r, n in counted.items())
    lines.append(f"{total} codes: {by_class}.\n")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
