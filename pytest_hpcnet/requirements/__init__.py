"""The requirements a run proves: one registry (id, title, expectation keys, marker,
certificate row) and, per requirement, the judge that decides a measurement against its bound.

Sits above probes and below campaigns: campaigns (localization, bisection), suites and the
report all read it.
"""
