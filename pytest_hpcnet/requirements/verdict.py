"""The one verdict type every judge returns, and the one way "not measured" is raised.

A judge turns typed results and the expectations into a `Verdict`: an outcome (`pass`,
`fail`, `not_measured`, `not_applicable`), the measurements it judged as data (subject with
device or GPU, value, unit, bound, comparison, the bound's source), the evidence sections it
read, and a one-line reason with the fix. The suite hands the verdict to its check
(`Check.judge`), which records the measurements and ends the test with the outcome; pair
localization, NCCL bisection and the gate read the same verdicts.

"Not measured" is never a pass and no waiver covers it: a cut, unparseable or missing output,
a node that did not answer, a bound that is not set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Outcome = Literal["pass", "fail", "not_measured", "not_applicable"]
PASS: Outcome = "pass"
FAIL: Outcome = "fail"
NOT_MEASURED: Outcome = "not_measured"
NOT_APPLICABLE: Outcome = "not_applicable"
OUTCOMES: tuple[Outcome, ...] = (PASS, FAIL, NOT_MEASURED, NOT_APPLICABLE)
MeasurementOutcome = Literal["pass", "fail", "not_measured"]
JUDGE = "judge"
"""The name of the measurement a verdict adds when its judge failed (or measured nothing)
without a measurement that says so: the failure stays with its subject, so no waiver for
another device covers it."""


class NotMeasured(Exception):
    """What a check needed was not measured (a facts section missing or cut, a pair not
    probed, an output that could not be read): the check's outcome is `not_measured`,
    which counts INCOMPLETE and which no waiver covers. Not an `AssertionError`, so nothing
    that classifies failures can mistake it for one."""


def number(value: Any) -> float | None:
    """A finite float of an int or float value (bools and text are not numbers), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    found = float(value)
    return found if math.isfinite(found) else None


def judged(
    value: Any, bound: Any, comparison: str | None, ceiling: float | None = None
) -> MeasurementOutcome | None:
    """The outcome of one figure that needs no judge's reading: `not_measured` for a number
    that is not finite or lies above its physical `ceiling` (implausible: not a
    measurement); `pass` or `fail` for a number against a numeric `>=`/`<=` bound, and for an
    exact `==`/`in` match (pass). None where only the judge can tell (a value its judge
    normalizes, a value missing): `Verdict` then gives it the verdict's outcome."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if numeric and number(value) is None:
        return NOT_MEASURED
    if numeric and ceiling is not None and value > ceiling:
        return NOT_MEASURED
    if comparison is None or bound is None or value is None:
        return None
    found, limit = number(value), number(bound)
    if comparison in (">=", "<=") and found is not None and limit is not None:
        return PASS if (found >= limit if comparison == ">=" else found <= limit) else FAIL
    if comparison == "==" and (value == bound or (found is not None and found == limit)):
        return PASS
    if comparison == "in" and isinstance(bound, list | tuple) and value in bound:
        return PASS
    return None


@dataclass(frozen=True)
class Measurement:
    """One measured quantity as a judge read it, with the bound it was judged against and
    its own outcome (`judged` unless the judge gives one)."""

    name: str
    value: float | int | str | None
    unit: str = ""
    bound: float | int | str | list | None = None
    comparison: str | None = None
    """`>=`, `<=`, `==` or `in`; None when the value is reported, not judged."""
    source: str = ""
    """Where the bound comes from: an expectation key, a profile figure's source."""
    subject: str = ""
    """The device or GPU within the check's subject (`erdma_1`, `GPU 3`), if narrower."""
    outcome: MeasurementOutcome | None = None
    """pass, fail or not_measured; None for a value reported, not judged."""
    ceiling: float | None = None
    """The physical ceiling (SKU, link or service peak): a figure above it is implausible,
    not measured."""
    basis: str = ""
    """How the bound was set: `profile floor`, `SKU figure x fraction`, `cluster median`, …"""
    code: str = ""
    """The fault code a failure of this figure means (`HPCNET-GPU-ECC-DBE`), one its
    requirement declares in the registry; "" takes the verdict's code, else the
    requirement's default when it is recorded."""

    def __post_init__(self) -> None:
        if self.outcome is None:
            found = judged(self.value, self.bound, self.comparison, self.ceiling)
            object.__setattr__(self, "outcome", found)
        elif self.outcome not in (PASS, FAIL, NOT_MEASURED):
            raise ValueError(f"unknown measurement outcome {self.outcome!r}")


def derived_outcome(outcome: Outcome, measurements: Iterable[Measurement]) -> Outcome:
    """A pass with its measurements' own outcomes: a failed measurement fails it, one not
    measured makes it not measured. A judge's failure or not-measured stands as it said."""
    if outcome != PASS:
        return outcome
    found = {m.outcome for m in measurements}
    if FAIL in found:
        return FAIL
    if NOT_MEASURED in found:
        return NOT_MEASURED
    return outcome


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one subject: outcome, measurements, sections read, reason, fix.

    `Verdict(passed, measured, bound, margin, reason)` is the short form of a single
    comparison (`margin`: headroom as a fraction of the bound; negative misses it); the
    outcome follows `passed` unless given. Truthy only when the outcome is `pass`."""

    passed: bool = False
    measured: float | None = None
    bound: float | None = None
    margin: float | None = None
    reason: str = ""
    fix: str = ""
    """What to do about it, when the judge knows."""
    outcome: Outcome | None = None
    measurements: tuple[Measurement, ...] = ()
    sections: tuple[str, ...] = ()
    """The evidence sections the judge read (facts section names)."""
    subject: str = ""
    """The node (and device) the verdict speaks for, when a judge names one: `node07
    erdma_1`."""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    """Judge-specific detail a caller may read (never judged again)."""
    code: str = ""
    """The fault code of this failure where the judge's reason tells the cause (a failed
    measurement without a code of its own takes it); "" leaves the requirement's default."""

    def __post_init__(self) -> None:
        if self.outcome is None:
            object.__setattr__(self, "outcome", PASS if self.passed else FAIL)
        elif self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}")
        own = self.reason or self.outcome
        kept = tuple(
            m
            for m in self.measurements
            if not (m.name == JUDGE and m.subject == self.subject and m.value == own)
        )
        outcome = derived_outcome(self.outcome, kept)
        found = tuple(
            replace(m, outcome=outcome)
            if m.outcome is None
            and m.comparison is not None
            and m.bound is not None
            and outcome != NOT_APPLICABLE
            else m
            for m in kept
        )
        if outcome in (FAIL, NOT_MEASURED) and all(m.outcome != outcome for m in found):
            said = Measurement(JUDGE, self.reason or outcome, outcome=outcome, subject=self.subject)
            # replace() runs this again: `own` finds it and puts it last once more
            found = (*found, said)
        if self.code:
            found = tuple(
                replace(m, code=self.code) if m.outcome == FAIL and not m.code else m for m in found
            )
        object.__setattr__(self, "measurements", found)
        object.__setattr__(self, "outcome", outcome)
        object.__setattr__(self, "passed", outcome == PASS)

    def __bool__(self) -> bool:
        return self.outcome == PASS

    @property
    def ok(self) -> bool:
        """True when the outcome is `pass`."""
        return self.outcome == PASS

    @property
    def measured_nothing(self) -> bool:
        """True when the outcome is `not_measured`."""
        return self.outcome == NOT_MEASURED

    def with_measurements(self, *found: Measurement) -> Verdict:
        """This verdict with more measurements."""
        return replace(self, measurements=self.measurements + tuple(found))

    def with_reported(self, *found: Measurement) -> Verdict:
        """This verdict with `found` recorded before its own measurements, as figures
        reported beside the decision: their outcomes are their own (`judged`) and the
        verdict's outcome does not read them. Give it last: `replace` would judge them."""
        copy = replace(self)
        object.__setattr__(copy, "measurements", (*found, *self.measurements))
        return copy

    def with_sections(self, *names: str) -> Verdict:
        """This verdict, naming the evidence sections it read."""
        return replace(self, sections=tuple(dict.fromkeys(self.sections + names)))

    def with_code(self, code: str) -> Verdict:
        """This verdict with the fault code of its failure (a pass or gap stays as it is)."""
        return replace(self, code=code) if self.outcome == FAIL else self

    def with_codes(self, codes: Mapping[str, str]) -> Verdict:
        """This verdict with each failed measurement coded by its name (`codes`: measurement
        name -> fault code; a name not listed keeps the verdict's or the default code)."""
        found = tuple(
            replace(m, code=codes[m.name])
            if m.outcome == FAIL and not m.code and m.name in codes
            else m
            for m in self.measurements
        )
        copy = replace(self)
        object.__setattr__(copy, "measurements", found)
        return copy

    def with_reason(self, reason: str) -> Verdict:
        """This verdict with another one-line reason."""
        return replace(self, reason=reason)


def passing(reason: str = "", **kw) -> Verdict:
    """A pass."""
    return Verdict(outcome=PASS, reason=reason, **kw)


def failing(reason: str, fix: str = "", **kw) -> Verdict:
    """A failure, with its reason and (where known) the fix."""
    return Verdict(outcome=FAIL, reason=reason, fix=fix, **kw)


def not_measured(reason: str, fix: str = "", **kw) -> Verdict:
    """Nothing (or not enough) was measured to judge: never a pass, never waived."""
    return Verdict(outcome=NOT_MEASURED, reason=reason, fix=fix, **kw)


def not_applicable(reason: str, **kw) -> Verdict:
    """The inventory expects nothing here (decided from the expectations, never from what
    was or was not measured)."""
    return Verdict(outcome=NOT_APPLICABLE, reason=reason, **kw)


def combine(verdicts: Iterable[Verdict], passed_reason: str = "") -> Verdict:
    """Several verdicts on one subject as one: a failure if any failed (its reasons joined),
    else not measured if any was not measured, else a pass; every measurement and section
    kept. An empty list was measured nothing."""
    found = list(verdicts)
    if not found:
        return not_measured(passed_reason or "nothing was judged")
    measurements = tuple(m for v in found for m in v.measurements)
    sections = tuple(dict.fromkeys(s for v in found for s in v.sections))
    for outcome in (FAIL, NOT_MEASURED):
        bad = [v for v in found if v.outcome == outcome]
        if bad:
            reason = "; ".join(dict.fromkeys(v.reason for v in bad if v.reason))
            fix = "; ".join(dict.fromkeys(v.fix for v in bad if v.fix))
            return Verdict(
                outcome=outcome,
                reason=reason,
                fix=fix,
                measurements=measurements,
                sections=sections,
                measured=bad[0].measured,
                bound=bad[0].bound,
                margin=bad[0].margin,
            )
    if all(v.outcome == NOT_APPLICABLE for v in found):
        return replace(found[0], measurements=measurements, sections=sections)
    return passing(passed_reason, measurements=measurements, sections=sections)
