"""A check's recorder for unit tests that call suite tests directly: a real `Check` whose
measurements read as a dict (name -> value)."""

from __future__ import annotations

from pytest_hpcnet.report.recording import Check


class Recorded(Check):
    """`Check` with `measured` as {name: value}."""

    def __init__(self, check_id: str = "check", subject: str = "n1") -> None:
        super().__init__(check_id, check_id, subject, "node", "", None)
        self.measured: dict[str, object] = {}  # type: ignore[assignment]

    def measure(self, name, value, *rest) -> None:
        self.measured[name] = value

    def record_measurement(self, m) -> None:
        if m.name != "judge":
            self.measured[m.name] = m.value
