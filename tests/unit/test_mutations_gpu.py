"""Mutation property of the GPU parsers and judges: a broken output is never a pass.

Over the GPU outputs (DCGM JSON, `nvidia-smi nvlink -s`/`-e`, nvbandwidth, `topo -m`, the load
program, the nvidia-smi samples; recorded fixtures and whole synthetic ones), each output is
mutated: two outputs run together, a row repeated, cut at sampled offsets (mid-number too),
an error line appended after the complete result, a GPU count, index or bus id replaced by
another, a numeric cell set to 0, -1, nan, inf, 1e300 or full-width digits (which float()
and int() read as numbers). Property: no parser or judge raises, and no mutated output is a
pass with the original expectations unless the judge's measurements equal the original's
(the mutation changed nothing that was measured). A full-width digit is never a pass.
Deterministic (no randomness); a few seconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.gpu_load import node_load
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.probes.gpu_dcgm import parse_dcgm_json
from pytest_hpcnet.probes.gpu_nvlink import parse_nvlink_errors, parse_nvlink_status
from pytest_hpcnet.probes.gpu_p2p import parse_nvbandwidth
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.sections import MARK
from pytest_hpcnet.requirements import gpu_load as load_judges
from pytest_hpcnet.requirements.gpu_dcgm import judge_gpu_dcgm
from pytest_hpcnet.requirements.gpu_nvlink import judge_gpu_nvlink
from pytest_hpcnet.requirements.gpu_p2p import NodeP2p, judge_gpu_p2p
from pytest_hpcnet.requirements.verdict import Verdict
from pytest_hpcnet.transport.results import CommandResult

FIXTURES = Path(__file__).parents[1] / "fixtures"
LOAD = FIXTURES / "gpu_load"
QUERY = parse_query_gpu((FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text())
TOPO = (FIXTURES / "gpu" / "topo-8gpu-2nic-erdma.txt").read_text()
H100 = (LOAD / "nvbandwidth-v0.10.0-h100-x8-d2d-read-ce-395GBs-cov-no-device-list.txt").read_text()
EIGHT = Expectations(
    gpu={"count": 8}, gpu_load={"nvlink_links": 18, "max_temperature_c": 85, "dcgm_level": 2}
)
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
VALUES = ("0", "-1", "nan", "inf", "1e300", "FULL")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
ERROR_LINES = (
    "Error: an illegal memory access was encountered",
    "Traceback (most recent call last):",
    "Segmentation fault (core dumped)",
)


# -- whole synthetic outputs (each a pass as it stands) ---------------------------------------


def nvlink_status(gpus: int = 8) -> str:
    return "".join(
        f"GPU {g}: NVIDIA H200 (UUID: GPU-{g:08d})\n"
        + "".join(f"\t Link {n}: 26.562 GB/s\n" for n in range(18))
        for g in range(gpus)
    )


def nvlink_errors(gpus: int = 8) -> str:
    return "".join(
        f"GPU {g}: NVIDIA H200 (UUID: GPU-{g:08d})\n"
        + "".join(
            f"\t Link {n}: {k} Errors: 0\n"
            for n in range(18)
            for k in ("Replay", "Recovery", "CRC")
        )
        for g in range(gpus)
    )


def dcgm_json(gpus: int = 8) -> str:
    tests = [("Deployment", "software"), ("Integration", "pcie"), ("Hardware", "memory")]
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": category,
                    "tests": [
                        {
                            "name": name,
                            "results": [
                                {"entity_group": "GPU", "entity_id": i, "status": "Pass"}
                                for i in range(gpus)
                            ],
                            "test_summary": {"status": "Pass"},
                        }
                    ],
                }
                for category, name in tests
            ]
        },
        "metadata": {"version": "4.2.3"},
    }
    return json.dumps(doc, indent="\t")


def load_output(gpus: int = 8) -> str:
    rows = [f"hpcnet-gpu-load 1 gpus={gpus} seconds=60 size=16384"]
    for i in range(gpus):
        rows.append(
            f"gpu={i} engine=torch version=2.5.1 cuda=12.4 bf16_tflops={786.2 + i * 0.3:.1f} "
            f"tf32_tflops={393.1 + i * 0.1:.1f} hbm_gbs={4334.2 - i:.1f} h2d_gbs=55.{70 + i} "
            f"d2h_gbs=56.{10 + i} checksum=d4b5ab1e1817cd5e checksum_stable=yes batches=33 "
            "cpus=any"
        )
    rows.append(f"end gpus={gpus} ok={gpus}")
    return "\n".join(rows) + "\n"


def samples_output(gpus: int = 8) -> str:
    rows = []
    for t in range(6):
        for i in range(gpus):
            temp = 60 + i + t
            rows.append(
                f"{i}, 00000000:{0x18 + 0x10 * i:02X}:00.0, 16541240069{20 + i}, "
                f"{1980 - t * 5}, {680.5 + t}, {temp}, 0x0000000000000004"
            )
    return "\n".join(rows) + "\n"


# -- the cases: one output of one kind, judged with the others fixed ---------------------------


def framed(load_text: str, samples_text: str) -> str:
    """The load command's stdout as the node prints it: two framed sections."""
    return (
        f"{MARK} begin gpu_load\n{load_text}\n{MARK} end gpu_load 0\n"
        f"{MARK} begin gpu_samples\n{samples_text}\n{MARK} end gpu_samples 0\n"
    )


def _load_verdicts(stdout: str) -> Verdict:
    """The three load judges on one node's load command output, as the campaign reads it."""
    result = CommandResult("n1", "load", 0, stdout, "", 1.0, 0.0)
    load = replace(node_load("n1", result), query=QUERY, expected_gpus=8)
    peers = {"n1": load}
    verdicts = (
        load_judges.judge_gpu_compute(load, peers, EIGHT),
        load_judges.judge_gpu_bandwidth(load, peers, EIGHT),
        load_judges.judge_gpu_correctness(load, peers),
    )
    failed = [v for v in verdicts if v.outcome != "pass"]
    every = tuple(m for v in verdicts for m in v.measurements)
    return Verdict(outcome=failed[0].outcome if failed else "pass", measurements=every)


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    judge: Callable[[str], Verdict]
    other: str = ""
    """Another output of the same kind, to run together with this one."""


def _cases() -> list[Case]:
    dcgm3 = (
        LOAD / "nvvs-3.1.0-json-8gpu-software-pass-null-entries-warning-prefix-dcgm-test.txt"
    ).read_text()
    dcgm4 = (LOAD / "dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json").read_text()
    b300 = (
        LOAD / "nvidia-smi-nvlink-status-b300-sxm6-x7-18links-53.125GBs-drv610-dell-xe9780.txt"
    ).read_text()
    seven = Expectations(gpu={"count": 7}, gpu_load={"nvlink_links": 18})
    lab_load = (LOAD / "load-8gpu-lab-faults-1-3-5-6.txt").read_text()
    lab_samples = (LOAD / "samples-8gpu-lab-hot-gpu6.csv").read_text()
    return [
        Case(
            "dcgm 4 level 2",
            dcgm_json(),
            lambda t: judge_gpu_dcgm("n1", parse_dcgm_json(t), QUERY, 2, expected_gpus=8),
            dcgm_json(7),
        ),
        Case(
            "dcgm 3 level 1",
            dcgm3,
            lambda t: judge_gpu_dcgm("n1", parse_dcgm_json(t), None, 1, expected_gpus=8),
            dcgm_json(),
        ),
        Case(
            "dcgm 4 fail",
            dcgm4,
            lambda t: judge_gpu_dcgm("n1", parse_dcgm_json(t), None, 1, expected_gpus=1),
            dcgm3,
        ),
        Case(
            "nvlink -s",
            nvlink_status(),
            lambda t: judge_gpu_nvlink(
                "n1", parse_nvlink_status(t), parse_nvlink_errors(nvlink_errors()), QUERY, EIGHT
            ),
            b300,
        ),
        Case(
            "nvlink -e",
            nvlink_errors(),
            lambda t: judge_gpu_nvlink(
                "n1", parse_nvlink_status(nvlink_status()), parse_nvlink_errors(t), QUERY, EIGHT
            ),
            nvlink_errors(7),
        ),
        Case(
            "nvlink -s b300",
            b300,
            lambda t: judge_gpu_nvlink(
                "n1", parse_nvlink_status(t), parse_nvlink_errors(nvlink_errors(7)), None, seven
            ),
            nvlink_status(),
        ),
        Case(
            "nvbandwidth",
            H100,
            lambda t: judge_gpu_p2p(
                p2p := NodeP2p("n1", parse_nvbandwidth(t), parse_topo(TOPO), QUERY),
                {"n1": p2p},
                EIGHT,
            ),
            (LOAD / "nvbandwidth-readme-8gpu-d2d-write-ce-276GBs-vendor-example.txt").read_text(),
        ),
        Case(
            "topo -m",
            TOPO,
            lambda t: judge_gpu_p2p(
                p2p := NodeP2p("n1", parse_nvbandwidth(H100), parse_topo(t), QUERY),
                {"n1": p2p},
                EIGHT,
            ),
            TOPO,
        ),
        Case(
            "load program and samples",
            framed(load_output(), samples_output()),
            _load_verdicts,
            framed(load_output(7), samples_output(7)),
        ),
        Case(
            "load program, lab faults",
            framed(lab_load, samples_output()),
            _load_verdicts,
            framed(load_output(), samples_output()),
        ),
        Case(
            "nvidia-smi samples, lab hot GPU",
            framed(load_output(), lab_samples),
            _load_verdicts,
            framed(load_output(), samples_output()),
        ),
    ]


CASES = {c.name: c for c in _cases()}


# -- the mutations -----------------------------------------------------------------------------


def _spread(n: int, count: int) -> list[int]:
    """`count` indices spread over range(n), first and last included."""
    if n <= count:
        return list(range(n))
    return sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})


def mutations(case: Case) -> Iterator[tuple[str, str]]:
    """(what, mutated text) for one output."""
    text = case.text
    lines = text.splitlines()
    yield "run together with itself", text + "\n" + text
    yield "run together with another", text + "\n" + case.other
    yield "another run first", case.other + "\n" + text
    for i in _spread(len(lines), 10):
        if lines[i].strip():
            yield f"line {i} repeated", "\n".join(lines[: i + 1] + lines[i:]) + "\n"
    for cut in _spread(len(text) - 1, 16):
        yield f"cut at {cut}", text[:cut]
    numbers = list(NUMBER.finditer(text))
    for m in (numbers[i] for i in _spread(len(numbers), 10)):
        if len(m.group()) > 1:
            middle = m.start() + len(m.group()) // 2
            yield f"cut mid-number at {middle}", text[:middle]
    for line in ERROR_LINES:
        yield f"appended {line!r}", text.rstrip("\n") + "\n" + line + "\n"
    for pattern, replacement in (
        (r"gpus=8", "gpus=7"),
        (r"gpus=8", "gpus=9"),
        (r"\bgpu=3\b", "gpu=2"),
        (r"^GPU 3:", "GPU 2:"),
        (r"^GPU 6:", "GPU 7:"),
        (r"^3, ", "2, "),
        (r"00000000:48:00\.0", "00000000:38:00.0"),
        (r'"entity_id" ?: ?3\b', '"entity_id": 2'),
        (r"0,1,2,3,4,5,6,7", "0,1,2,3,4,5,6"),
        (r"^GPU3\t", "GPU2\t"),
        (r"^ 3 ", " 2 "),
    ):
        found = re.search(pattern, text, re.M)
        if found:
            once = text[: found.start()] + replacement + text[found.end() :]
            yield f"{pattern} -> {replacement} once", once
            yield f"{pattern} -> {replacement} all", re.sub(pattern, replacement, text, flags=re.M)
    for m in (numbers[i] for i in _spread(len(numbers), 24)):
        for value in VALUES:
            new = m.group().translate(FULL_WIDTH) if value == "FULL" else value
            if new != m.group():
                yield (
                    f"number {m.group()!r} at {m.start()} -> {value}",
                    (text[: m.start()] + new + text[m.end() :]),
                )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_mutated_gpu_output_is_never_a_pass_with_other_figures(name):
    case = CASES[name]
    original = case.judge(case.text)
    bad: list[str] = []
    tried = 0
    found = list(mutations(case))
    nan_instead = {
        what: dict(found)[what.removesuffix("FULL") + "nan"]
        for what, _ in found
        if what.endswith("-> FULL")
    }
    for what, mutated in found:
        tried += 1
        try:
            verdict = case.judge(mutated)
        except Exception as exc:  # the property under test
            bad.append(f"{what}: raised {exc!r}")
            continue
        if verdict.outcome != "pass":
            continue
        if what.endswith("-> FULL") and case.judge(nan_instead[what]).outcome != "pass":
            # the cell is judged (nan there fails): the full-width digit was read as a number
            bad.append(f"{what}: a full-width digit read as a number, a pass")
        elif verdict.measurements != original.measurements:
            changed = [
                (a.subject, a.name, a.value, b.value)
                for a, b in zip(original.measurements, verdict.measurements, strict=False)
                if a != b
            ]
            shown = changed[:2] or f"{len(original.measurements)} -> {len(verdict.measurements)}"
            bad.append(f"{what}: a pass with other figures {shown}")
    assert tried > 40
    assert not bad, f"{name}: {len(bad)} of {tried}:\n" + "\n".join(bad[:12])


def test_the_whole_synthetic_outputs_pass_and_the_fixtures_judge_as_recorded():
    """The property is only worth something where the original is a pass (or a known fail)."""
    outcomes = {name: case.judge(case.text).outcome for name, case in CASES.items()}
    assert outcomes == {
        "dcgm 4 level 2": "pass",
        "dcgm 3 level 1": "pass",
        "dcgm 4 fail": "fail",
        "nvlink -s": "pass",
        "nvlink -e": "pass",
        "nvlink -s b300": "pass",
        "nvbandwidth": "pass",
        "topo -m": "pass",
        "load program and samples": "pass",
        "load program, lab faults": "fail",
        "nvidia-smi samples, lab hot GPU": "fail",
    }
