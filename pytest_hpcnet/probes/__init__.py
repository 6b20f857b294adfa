"""Probes: per area, a command builder, a pure parser and a typed result.

A parser never touches the network and never raises on odd text; its result
says what it could not read.
"""
