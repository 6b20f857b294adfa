"""The nightly health gate: act on a finished run (Slurm drain/resume, a generic action hook).

The gate reads a run folder (`evidence.jsonl`, `summary.json`), judges each node, plans what
to do and, only when asked to act, does it. See docs/gate.md.
"""
