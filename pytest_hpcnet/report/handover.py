"""The end of a run: the certificate's context from the inventory and the nodes' placement,
then metrics, the certificate and its signature, in that order."""

from __future__ import annotations

import contextlib
import getpass
import socket
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.metadata import MetadataFacts
from pytest_hpcnet.report.certificate.page import (
    CertificateContext,
    RequirementSpec,
    render_certificate,
)
from pytest_hpcnet.report.evidence import read_records
from pytest_hpcnet.report.metrics import write_prometheus_textfile
from pytest_hpcnet.report.signing import sign, signer_display
from pytest_hpcnet.requirements.registry import certificate_specs


def run_context(
    inventory: Inventory,
    placement: Mapping[str, MetadataFacts],
    unreachable: Iterable[str],
    operator: str | None = None,
) -> CertificateContext:
    """What the certificate says beyond the evidence: cluster, placement, people (the
    operator named by `--hpcnet-operator`, else by the inventory's `cluster.operator`), the
    inventory's text, rows."""

    def shared(field: str) -> str:
        values = {getattr(m, field) for m in placement.values() if getattr(m, field)}
        return ", ".join(sorted(values))

    def instance_type(name: str) -> str:
        found = placement.get(name)
        return (found.instance_type or "") if found is not None else ""

    inv = inventory
    return CertificateContext(
        cluster=inv.cluster.name,
        region=inv.cluster.region,
        vpc_id=shared("vpc_id"),
        vswitch_id=shared("vswitch_id"),
        zone=shared("zone_id"),
        nodes=[{"name": n.name, "instance_type": instance_type(n.name)} for n in inv.nodes],
        operator=(operator or inv.cluster.operator or "").strip(),
        login=f"{getpass.getuser()}@{socket.gethostname()}",
        inventory_copy=_inventory_text(inv.path),
        waivers=list(inv.waivers),
        contacts=[{"name": c.name, "role": c.role or ""} for c in inv.cluster.contacts],
        inventory_sha256=inv.sha256,
        expectations_sha256=inv.expect_sha256,
        unreachable_nodes=sorted(unreachable),
        requirements=[RequirementSpec(check_id=c, requirement=r) for c, r in certificate_specs()],
    )


def _inventory_text(path: Path) -> str:
    """The inventory as written ("" where it can no longer be read)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def finish_run(
    run_dir: Path,
    context: CertificateContext,
    run_date: date,
    metrics: str | None = None,
    sign_key: str | None = None,
) -> Path:
    """Write the metrics textfile (if asked), render the certificate, sign it (if a key is
    given); returns the certificate's path."""
    if metrics:
        labels = {"cluster": context.cluster}
        write_prometheus_textfile(metrics, read_records(run_dir), labels, run_date)
    if sign_key:  # the certificate names the key that signs it; a bad key fails in sign()
        with contextlib.suppress(OSError, ValueError, TypeError):
            context = context.model_copy(update={"signer": signer_display(sign_key)})
    certificate = render_certificate(run_dir, context)
    if sign_key:
        sign(run_dir, sign_key)
    return certificate
