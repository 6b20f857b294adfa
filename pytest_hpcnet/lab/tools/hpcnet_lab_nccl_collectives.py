"""hpcnet lab emulation of nccl-tests' `all_gather_perf`, `reduce_scatter_perf`,
`alltoall_perf` and `sendrecv_perf` (the same tool as `all_reduce_perf`, named by argv[0]):
real data moved over the emulated all-reduce's TCP ring, checked under -c 1.

The table is each collective's own, as nccl-tests 2.18/2.19 print it (real recorded outputs
in tests/fixtures/nccl_collectives): size is the whole buffer, count the elements per rank
(sendrecv: the whole buffer), redop `sum` for reduce_scatter and `none` for the others, root
-1, busbw = algbw x (n-1)/n (sendrecv x 1), in-place #wrong N/A for alltoall and sendrecv.
Ring algorithms: all-gather and reduce-scatter the usual n-1 steps; sendrecv one exchange
with the ring neighbours; all-to-all relays each rank's blocks along the ring (the block for
the rank d hops on rides d links). The ERIs' counters move by the collective's traffic share
per rank and operation, S(n-1)/n (sendrecv S), not by the relay's bytes.
Lab faults: `nccl-incast NODE [FACTOR]` stretches this rank's alltoall and all-gather
(many-to-one patterns) by FACTOR, leaving all-reduce, reduce-scatter and sendrecv alone;
`nccl-socket-one NODE COLLECTIVE` (hpcnet_lab_nccl_net) puts this node on sockets for that
collective only. With one rank per node there is no intra-node path, so NCCL_P2P_DISABLE and
NCCL_SHM_DISABLE change no traffic (NCCL's INFO lines still say they were set).
"""

from __future__ import annotations

import operator
import time
from array import array

import hpcnet_lab_node as node

FACTOR = {"all_gather": "n-1/n", "reduce_scatter": "n-1/n", "alltoall": "n-1/n", "sendrecv": "1"}
REDOP = {"reduce_scatter": "sum"}
INPLACE_NA = ("alltoall", "sendrecv")
INCAST = ("alltoall", "all_gather")
INCAST_FACTOR = 10.0
PATTERN = 13


def key_of(binary: str) -> str:
    """`all_gather_perf` -> `all_gather`."""
    return binary.rsplit("/", 1)[-1].removesuffix("_mpi").removesuffix("_perf")


def bus_factor(key: str, n: int) -> float:
    return 1.0 if key == "sendrecv" else (n - 1) / n


def traffic_share(key: str, size: int, n: int) -> int:
    """Bytes each rank sends over the network per operation of `size` bytes."""
    return size if key == "sendrecv" else size * (n - 1) // n


def incast_factor(key: str) -> float:
    value = node.faults().get("nccl-incast")
    if value is None or key not in INCAST:
        return 1.0
    try:
        return max(1.0, float(value))
    except ValueError:
        return INCAST_FACTOR


def pattern(rank: int, count: int, offset: int = 0) -> array:
    """Rank r's element i of a buffer starting at `offset`: (offset + i + r) % 13."""
    start = (offset + rank) % PATTERN
    block = array("f", [float((start + i) % PATTERN) for i in range(PATTERN)])
    return (block * (count // PATTERN + 1))[:count]


def round_size(size: int, n: int) -> int:
    """Whole floats per rank (nccl-tests rounds the size down likewise)."""
    unit = 4 * n
    return size - size % unit or unit


def run_op(ring, key: str, send: array, count: int) -> array:
    """One operation of the collective on this rank; the receive buffer it fills."""
    n, r = ring.size, ring.rank
    per = count // n
    item = 4
    if n == 1:
        return array("f", send)
    if key == "all_gather":
        out = array("f", bytes(count * item))
        out[r * per : (r + 1) * per] = send
        view = memoryview(out).cast("B")
        for step in range(n - 1):
            s, t = (r - step) % n, (r - step - 1) % n
            ring.exchange(view[s * per * item : (s + 1) * per * item],
                          view[t * per * item : (t + 1) * per * item])  # fmt: skip
        return out
    if key == "reduce_scatter":
        work = array("f", send)
        view = memoryview(work).cast("B")
        for step in range(n - 1):
            s, t = (r - step - 1) % n, (r - step - 2) % n
            incoming = array("f", bytes(per * item))
            ring.exchange(view[s * per * item : (s + 1) * per * item],
                          memoryview(incoming).cast("B"))  # fmt: skip
            work[t * per : (t + 1) * per] = array(
                "f", map(operator.add, work[t * per : (t + 1) * per], incoming)
            )
        return work[r * per : (r + 1) * per]
    if key == "sendrecv":
        out = array("f", bytes(count * item))
        ring.exchange(memoryview(send).cast("B"), memoryview(out).cast("B"))
        return out
    # alltoall: carry the blocks for the ranks 1..n-1 hops on; each hop keeps its own
    out = array("f", bytes(count * item))
    out[r * per : (r + 1) * per] = send[r * per : (r + 1) * per]
    carry = array("f")
    for d in range(1, n):
        j = (r + d) % n
        carry.extend(send[j * per : (j + 1) * per])
    for step in range(1, n):
        incoming = array("f", bytes((n - step) * per * item))
        ring.exchange(memoryview(carry).cast("B"), memoryview(incoming).cast("B"))
        src = (r - step) % n
        out[src * per : (src + 1) * per] = incoming[:per]
        carry = incoming[per:]
    return out


def expected(key: str, n: int, r: int, count: int) -> array:
    per = count // n
    if key == "all_gather":
        out = array("f")
        for j in range(n):
            out.extend(pattern(j, per))
        return out
    if key == "reduce_scatter":
        sums = [sum((r * per + i + j) % PATTERN for j in range(n)) for i in range(PATTERN)]
        return (array("f", [float(x) for x in sums]) * (per // PATTERN + 1))[:per]
    if key == "sendrecv":
        return pattern((r - 1) % n, count)
    out = array("f")
    for j in range(n):
        out.extend(pattern(j, per, r * per))
    return out


def source(key: str, n: int, r: int, count: int) -> array:
    """This rank's send buffer (all_gather: its own block only)."""
    return pattern(r, count // n if key == "all_gather" else count)


def run_size(ring, key: str, size: int, args, in_place: bool) -> tuple[float, int]:
    """(average usec, wrong values over all ranks) of one size."""
    n = ring.size
    count = size // 4
    send = source(key, n, ring.rank, count)
    slow = incast_factor(key)
    for _ in range(args.warmup_iters):
        run_op(ring, key, send, count)
    ring.total(0)
    started = time.perf_counter()
    out = send
    for _ in range(args.iters):
        began = time.perf_counter()
        out = run_op(ring, key, send, count)
        if slow > 1.0:  # `nccl-incast`: this rank's many-to-one receives run `slow` times long
            time.sleep((slow - 1.0) * (time.perf_counter() - began))
    usec = (time.perf_counter() - started) * 1e6 / max(1, args.iters)
    wrong = 0
    if args.check and not (in_place and key in INPLACE_NA):
        want = expected(key, n, ring.rank, count)
        if out.tobytes() != want.tobytes():  # memcmp: an element-wise compare is slow
            wrong = sum(1 for a, b in zip(out, want, strict=False) if a != b) + abs(
                len(out) - len(want)
            )
    return usec, ring.total(wrong)


def row(
    key: str, size: int, n: int, measured: list[tuple[float, float, float, int]], check: int
) -> str:
    count = size // 4 if key == "sendrecv" else size // 4 // n
    text = f"{size:12d}  {count:12d}     float  {REDOP.get(key, 'none'):>6}      -1"
    for i, (usec, algbw, busbw, wrong) in enumerate(measured):
        na = not check or (i == 1 and key in INPLACE_NA)
        shown = "N/A" if na else str(wrong)
        text += f"  {usec:7.1f}  {algbw:6.2f}  {busbw:6.2f}  {shown:>5}"
    return text
