"""Measurement campaigns over the whole cluster: facts, pair probes, perftest rounds, NCCL
(with bisection) and fio, each run once per session and cached.

Campaigns use inventory, transport, probes and the requirement judges; they know nothing
of the report layer (the recorder of the current check is passed in).
"""
