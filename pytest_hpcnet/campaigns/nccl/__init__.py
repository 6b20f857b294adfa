"""NCCL across the cluster: the launch, all-reduce, the collectives, bisection."""
