"""The checks a `-m gpu_load` run records, as the tests expect them (written out, not read
from the registry, so a check that drops out of the suite fails them)."""

GPU_LOAD_CHECKS = frozenset(
    {
        "gpu_compute",
        "gpu_correctness",
        "gpu_bandwidth",
        "gpu_nvlink",
        "gpu_dcgm",
        "gpu_nccl_node",
        "gpu_p2p",
        "gpu_fabric",
    }
)
