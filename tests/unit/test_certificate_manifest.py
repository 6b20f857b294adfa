"""The certificate's manifest: one line of agreed versions and firmware per instance type,
and the odd nodes, from the consistency judges' measurements (no requirement named)."""

from __future__ import annotations

import re

from pytest_hpcnet.report.certificate.versions import manifest
from tests.certificate_bundle import print_manifest, write_print_case


def test_manifest_lines_per_type_and_odd_values():
    found = manifest([print_manifest(["n1", "n2", "n3", "n4"], odd=True)])
    assert [line.instance_type for line in found.lines] == [
        "ecs.ebmgn8v.48xlarge",
        "ecs.ebmgn8is.32xlarge",
    ]
    items = dict(found.lines[0].items)
    assert items["vbios"] == "96.00.A5.00.1A" and items["nic_firmware"] == "(empty)"
    assert [(o.subject, o.value, o.agreed) for o in found.odd] == [
        (f"{n} GPU 3 (00000000:5D:00.0)", "96.00.A5.00.1B", "96.00.A5.00.1A") for n in ("n1", "n4")
    ]


def test_certificate_shows_the_manifest_instead_of_the_table(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_print_case(run, "REJECTED", 4)
    html = (run / "certificate.html").read_text()
    section = html[html.index('<section id="versions">') :]
    section = section[: section.index("</section>")]
    assert re.search(
        r"<strong>ecs\.ebmgn8v\.48xlarge</strong>: nvidia_driver 580\.159\.04 · ", section
    )
    assert (
        "node01 GPU 3 (00000000:5D:00.0): vbios 96.00.A5.00.1B (agreed 96.00.A5.00.1A)" in section
    )
    assert '<th class="mono">kernel</th>' not in section  # the per-node table: in the appendix
