"""Talking to nodes: opening connections (hops, host keys), the remote shell, bounded fan-out.

Only this layer talks SSH. It reads the inventory and nothing above it.
"""
