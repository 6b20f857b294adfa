"""A check's recorder for unit tests that call suite tests directly: a real `Check` whose
measurements read as a dict (name -> value); and a judge's verdict as the record `Check`
makes of it."""

from __future__ import annotations

from pytest_hpcnet.report.recording import Check
from pytest_hpcnet.report.records import CheckRecord


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


def as_record(
    verdict, check_id: str, subject: str, requirement: str = "", message: str = ""
) -> CheckRecord:
    """What `Check.judge` records of a verdict, through the real `Check`: its measurements
    (a failure's code included) under the verdict's outcome and `message`."""
    check = Check(check_id, requirement or check_id, subject, "node", f"t::x[{subject}]", None)
    for m in verdict.measurements:
        check.record_measurement(m)
    return CheckRecord.model_validate(check.record(verdict.outcome, message, None))
