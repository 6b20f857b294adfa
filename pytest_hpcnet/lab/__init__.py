"""The lab: a cluster of network namespaces on one Linux host, the embedded default.

Each node is a namespace with a veth into one bridge, its own sshd, address and
MTU. Only this package creates namespaces; `hpcnet lab up|status|down` drives it.
"""
