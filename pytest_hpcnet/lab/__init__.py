"""The lab: a cluster of network namespaces on one Linux host, the embedded default.

Each node is a namespace with a veth into one bridge, its own sshd, address and MTU, an
ECS-style metadata service on 100.100.100.200, tuned per-namespace sysctls, and lab
emulations of `ibv_devinfo` and `rdma` (not the real tools) on its SSH sessions' PATH.
Only this package creates namespaces; `hpcnet lab up|status|down|fault|heal` drives it.
"""
