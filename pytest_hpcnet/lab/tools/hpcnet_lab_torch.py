"""hpcnet lab emulation of PyTorch for the GPU load program: not torch, no GPU, no math.

Installed as the package `torch` on lab nodes' PYTHONPATH (`<state>/bin/pylib`), so the
plugin's load program runs its real code path there. Only what that program calls exists.
Each GPU keeps a virtual device clock: a GEMM or copy queues its duration at the emulated
H200's rate (the figures of `RATES`), events record the clock and the device time worked so
far, `synchronize` sleeps until the wall clock reaches it: timing is paced like a GPU, the
host's CPUs stay idle, and `elapsed_time` counts device work only, so a busy lab host does
not change the figures. Tensors
carry how they were made instead of numbers; the checksum program's bytes are a digest of
that recipe, identical on every healthy GPU. While a GPU has work queued, its busy file
(`<state>/nodes/<node>/gpu_busy/<slot>`) tells the emulated nvidia-smi it is under load.
Faults (`lab.json`, per GPU): `gpu-slow` (GEMMs at 0.6x), `gpu-hot` (thermal slowdown
under load: GEMMs at 0.7x), `gpu-checksum` (its products differ), `gpu-hbm-slow`
(device copies at 0.5x), `gpu-host-slow` (host copies at 0.5x), `p2p-slow` (copies between
one GPU pair at 0.45x; every pair has peer access, at 395.1 GB/s); the burn-in's
`burnin-throttle` (GEMMs at 0.7x from its time on) and `burnin-checksum` (products differ
after N seeded products, one per window); the static
`gpu-pcie-downgrade` (gen4 x8) moves host copies at a quarter of gen5 x16.
"""

from __future__ import annotations

import hashlib
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the lab tools' shared modules

import hpcnet_lab_gpu as _gpu
import hpcnet_lab_node as _node
import hpcnet_lab_rdma as _lab

__version__ = "2.5.1+hpcnet.lab.emulation"
version = types.SimpleNamespace(cuda="12.4")
RATES = {
    "bf16": 780e12,
    "tf32": 390e12,
    "hbm": 4300e9,
    "h2d": 55.3e9,
    "d2h": 55.6e9,
    "p2p": 395.1e9,
}
"""Per second; bf16/tf32 in FLOP, copies in bytes (HBM: read plus written). Near what a real
H200 gives (docs/checks.md, "GPUs under load"), not measured here."""
FAULT_FACTORS = {
    "gpu-slow": {"bf16": 0.6, "tf32": 0.6},
    "gpu-hot": {"bf16": 0.7, "tf32": 0.7},
    "gpu-hbm-slow": {"hbm": 0.5},
    "gpu-host-slow": {"h2d": 0.5, "d2h": 0.5},
}


class dtype:
    def __init__(self, name: str, size: int):
        self.name, self.size = name, size

    def __repr__(self) -> str:
        return f"torch.{self.name}"


bfloat16, float32, uint8 = dtype("bfloat16", 2), dtype("float32", 4), dtype("uint8", 1)
int32, int64 = dtype("int32", 4), dtype("int64", 8)


class device:
    def __init__(self, spec: str):
        self.type, _, index = str(spec).partition(":")
        self.index = int(index) if index else (0 if self.type == "cuda" else None)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def _fault_slots(kind: str) -> set[int]:
    value = _node.faults().get(kind)
    if value is None:
        return set()
    return {int(value) if value.isdigit() else 3}


P2P_SLOW = 0.45
"""Fault `p2p-slow` (PAIR `a-b`, default 2-5): copies between those two GPUs at 0.45x, as the
emulated nvbandwidth prints them."""


def _slow_pair() -> set[int]:
    value = _node.faults().get("p2p-slow")
    if value is None:
        return set()
    a, _, b = value.partition("-")
    return {int(a), int(b)} if a.isdigit() and b.isdigit() else {2, 5}


class _Gpu:
    """One emulated GPU: its slot on the board, virtual clock and faults."""

    def __init__(self, index: int):
        rows = _gpu.gpus()
        if index >= len(rows):
            raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
        self.slot = _gpu.BUS_IDS.index(rows[index]["pci.bus_id"][9:11])
        self.busy_until = time.time()
        self.worked_s = 0.0
        self.factors = {k: 1.0 for k in RATES}
        for kind, factors in FAULT_FACTORS.items():
            if self.slot in _fault_slots(kind):
                self.factors.update(factors)
        if self.slot in _fault_slots("gpu-pcie-downgrade"):  # gen4 x8 of gen5 x16
            self.factors.update({"h2d": 0.25, "d2h": 0.25})
        self.corrupt = self.slot in _fault_slots("gpu-checksum")
        self.hot_from: float | None = None
        self.corrupt_after: int | None = None
        self.seeded = 0
        self.read_at = 0.0
        self.read_timed()
        h = hashlib.sha256(f"{_lab.node_name()}/{self.slot}".encode()).digest()
        self.spread = 1.0 + (h[0] / 255.0 - 0.5) * 0.02  # each GPU within +-1 %
        self._written = 0.0
        self.busy_file = _lab.state_dir() / "nodes" / _lab.node_name() / "gpu_busy" / str(self.slot)

    def read_timed(self) -> None:
        """The burn-in faults of this GPU, read again at most once a second (a burn-in's
        children live for hours; its faults are injected while they run)."""
        if time.time() - self.read_at < 1.0:
            return
        self.read_at = time.time()
        faults = _node.faults()
        hot = _gpu.timed_fault(faults, "burnin-throttle")
        self.hot_from = hot[1] if hot is not None and hot[0] == self.slot else None
        bad = _gpu.timed_fault(faults, "burnin-checksum")  # GPU@WINDOWS: products counted
        self.corrupt_after = int(bad[1]) if bad is not None and bad[0] == self.slot else None

    def queue(self, work: float, kind: str) -> None:
        self.read_timed()
        rate = RATES[kind] * self.factors[kind] * self.spread
        if self.hot_from is not None and kind in ("bf16", "tf32") and time.time() >= self.hot_from:
            rate *= FAULT_FACTORS["gpu-hot"][kind]  # burn-in throttle: heat soaked
        self.busy_until = max(self.busy_until, time.time()) + work / rate
        self.worked_s += work / rate
        if self.busy_until > self._written - 1.0:
            self._written = self.busy_until + 2.0
            try:
                self.busy_file.parent.mkdir(parents=True, exist_ok=True)
                self.busy_file.write_text(f"{self._written:.3f}\n")
            except OSError:
                pass


_gpus: dict[int, _Gpu] = {}
_current = [0]


def _on(dev: device | None) -> _Gpu:
    index = _current[0] if dev is None or dev.index is None else dev.index
    if index not in _gpus:
        _gpus[index] = _Gpu(index)
    return _gpus[index]


class Generator:
    def __init__(self, device: str = "cpu"):
        self.seed, self.draws = 0, 0

    def manual_seed(self, seed: int) -> Generator:
        self.seed, self.draws = seed, 0
        return self


class _Bytes:
    def __init__(self, data: bytes):
        self.data = data

    def tobytes(self) -> bytes:
        return self.data


class Tensor:
    """Shape, dtype, device and the recipe of its contents (no numbers)."""

    def __init__(self, shape, dtype_, dev, recipe: str, pinned: bool = False):
        self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        self.dtype, self.device, self.recipe, self.pinned = dtype_, dev, recipe, pinned

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def nbytes(self) -> int:
        return self.numel() * self.dtype.size

    def to(self, dev=None, dtype_=None) -> Tensor:
        if isinstance(dev, dtype):
            dev, dtype_ = None, dev
        target = device(str(dev)) if dev is not None else self.device
        kind = dtype_ or self.dtype
        return Tensor(self.shape, kind, target, f"{self.recipe}>{kind.name}")

    def float(self) -> Tensor:
        return self.to(None, float32)

    def cpu(self) -> Tensor:
        return Tensor(self.shape, self.dtype, device("cpu"), self.recipe)

    def contiguous(self) -> Tensor:
        return self

    def numpy(self) -> _Bytes:
        digest = hashlib.sha256(self.recipe.encode()).digest()
        return _Bytes(digest * 4)

    def view(self, kind: dtype) -> Tensor:
        return Tensor(self.shape, kind, self.device, f"{self.recipe}>view:{kind.name}")

    def flatten(self) -> Tensor:
        return Tensor((self.numel(),), self.dtype, self.device, self.recipe)

    def _op(self, name: str, other: object) -> Tensor:
        theirs = other.recipe if isinstance(other, Tensor) else repr(other)
        return Tensor(self.shape, self.dtype, self.device, f"{name}({self.recipe},{theirs})")

    def __and__(self, other: object) -> Tensor:
        return self._op("and", other)

    def __rshift__(self, other: object) -> Tensor:
        return self._op("rshift", other)

    def __mod__(self, other: object) -> Tensor:
        return self._op("mod", other)

    def __add__(self, other: object) -> Tensor:
        return self._op("add", other)

    def __mul__(self, other: object) -> Tensor:
        return self._op("mul", other)

    def sum(self) -> Tensor:
        return Tensor((), int64, self.device, f"sum({self.recipe})")

    def item(self) -> int:
        """A number that stands for the value: the same wherever the recipe is the same."""
        return int(hashlib.sha256(self.recipe.encode()).hexdigest()[:12], 16)

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        if (
            self.device.type == "cuda"
            and src.device.type == "cuda"
            and src.device.index != (self.device.index)
        ):  # GPU to GPU: on the source's stream, as PyTorch issues it
            source, target = _on(src.device), _on(self.device)
            slow = {source.slot, target.slot} == _slow_pair()
            source.queue(src.nbytes() / (P2P_SLOW if slow else 1.0), "p2p")
        elif self.device.type == "cuda" and src.device.type == "cuda":
            _on(self.device).queue(src.nbytes() * 2, "hbm")
        elif self.device.type == "cuda":
            _on(self.device).queue(src.nbytes(), "h2d")
        elif src.device.type == "cuda":
            _on(src.device).queue(src.nbytes(), "d2h")
        self.recipe = src.recipe
        return self

    def __matmul__(self, other: Tensor) -> Tensor:
        return matmul(self, other)


def _device(dev) -> device:
    return dev if isinstance(dev, device) else device(str(dev or "cpu"))


def randn(shape, device=None, dtype=None, generator=None) -> Tensor:
    dev = _device(device)
    if generator is not None:
        generator.draws += 1
        recipe = f"randn({generator.seed}#{generator.draws},{shape})"
    else:
        recipe = f"randn(?{time.time_ns()},{shape})"
    return Tensor(shape, dtype or float32, dev, recipe)


def empty(shape, dtype=None, device=None, pin_memory=False) -> Tensor:
    return Tensor(shape, dtype or float32, _device(device), "empty", pinned=pin_memory)


def arange(end: int, device=None, dtype=None) -> Tensor:
    return Tensor((end,), dtype or int64, _device(device), f"arange({end})")


def empty_like(t: Tensor) -> Tensor:
    return Tensor(t.shape, t.dtype, t.device, "empty")


def matmul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    gpu = _on(a.device)
    n, k = a.shape[0], a.shape[-1]
    m = b.shape[-1]
    kind = "bf16" if a.dtype is bfloat16 else "tf32"
    gpu.queue(2.0 * n * k * m, kind)
    if a.recipe.startswith("randn(") and not a.recipe.startswith("randn(?"):
        gpu.seeded += 1  # a checksum's seeded product: one per burn-in window
    late = gpu.corrupt_after is not None and gpu.seeded > gpu.corrupt_after
    recipe = f"mm({a.recipe},{b.recipe})" + ("!" if gpu.corrupt or late else "")
    result = out or Tensor((n, m), a.dtype, a.device, recipe)
    result.recipe = recipe
    return result


class _Event:
    def __init__(self, enable_timing: bool = False):
        self.at: float | None = None
        self.worked_s = 0.0

    def record(self) -> None:
        gpu = _on(None)
        self.at, self.worked_s = max(gpu.busy_until, time.time()), gpu.worked_s

    def synchronize(self) -> None:
        if self.at is not None:
            time.sleep(max(0.0, self.at - time.time()))

    def elapsed_time(self, end: _Event) -> float:
        return (end.worked_s - self.worked_s) * 1000.0


def _synchronize(dev=None) -> None:
    time.sleep(max(0.0, _on(_device(dev) if dev is not None else None).busy_until - time.time()))


def _set_device(dev) -> None:
    _current[0] = _device(dev).index or 0


cuda = types.SimpleNamespace(
    Event=_Event,
    synchronize=_synchronize,
    set_device=_set_device,
    is_available=lambda: bool(_gpu.gpus()),
    device_count=lambda: len(_gpu.gpus()),
    can_device_access_peer=lambda a, b: a != b and max(a, b) < len(_gpu.gpus()),
)
backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()))
backends.cuda.matmul.allow_tf32 = False
