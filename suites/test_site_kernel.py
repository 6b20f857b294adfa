"""A site's own check: every node runs the kernel the site pinned.

Pin it with `HPCNET_SITE_KERNEL=5.10.134-16.3.al8.x86_64` (`uname -r` of a known-good node);
without a pin, every node must run the kernel most nodes run, so one node left behind by an
upgrade fails. The release comes from the facts every run gathers (`kernel`: `uname -r`), so
the check costs no extra round trip.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from pytest_hpcnet.campaigns.cluster import MissingMeasurement

PINNED = os.environ.get("HPCNET_SITE_KERNEL", "").strip()


def most_common_kernel(cluster) -> str | None:
    """The release most reachable nodes report (None: no node reported one)."""
    releases = Counter()
    for facts in cluster.gather_facts().values():
        try:
            releases[facts.text("kernel").strip()] += 1
        except MissingMeasurement:
            continue
    return releases.most_common(1)[0][0] if releases else None


@pytest.mark.static
@pytest.mark.check("site_kernel", "Kernel release is the site's")
def test_kernel_release_is_the_sites(cluster, node, check):
    release = cluster.facts(node, check).text("kernel").strip()
    expected = PINNED or most_common_kernel(cluster)
    basis = "HPCNET_SITE_KERNEL" if PINNED else "the release most nodes run"
    check.measure("kernel_release", release, "", expected, "==", basis)
    assert release == expected, f"{node.name}: kernel {release}, expected {expected} ({basis})"
