"""What a node says it is: its hostname (`hostname`) and kernel release (`uname -r`), one
line each."""

from __future__ import annotations

from pytest_hpcnet.probes.sections import Section, always


def one_line(text: str) -> str:
    """The output without its surrounding whitespace ("" when the command printed nothing)."""
    return text.strip()


HOSTNAME: Section[str] = Section("hostname", one_line, build=always("hostname"))
KERNEL: Section[str] = Section("kernel", one_line, build=always("uname -r"))
