"""Every published ECS metadata listing parses to its entries."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes import metadata
from tests.corpus import corpus_files

COMMON = (
    "dns-conf/",
    "eipv4",
    "hostname",
    "image-id",
    "instance-id",
    "instance/",
    "mac",
    "network-type",
    "network/",
    "ntp-conf/",
    "owner-account-id",
    "private-ipv4",
)
EXPECTED = {
    "alibaba-blog-curl-latest-listing.txt": ("meta-data", "user-data", "dynamic"),
    "alibaba-blog-curl-latest-meta-data-listing.txt": (
        *COMMON,
        "region-id",
        "serial-number",
        "source-address",
        "sub-private-ipv4-list",
        "vpc-cidr-block",
        "vpc-id",
        "vswitch-cidr-block",
        "vswitch-id",
    ),
    "alibaba-blog-curl-root-versions.txt": ("2016-01-01",),
    "cloud-init-docs-aliyun-2016-01-01-meta-data-listing.txt": (
        *COMMON,
        "public-keys/",
        "region-id",
        "serial-number",
        "source-address",
        "sub-private-ipv4-list",
        "vpc-cidr-block",
        "vpc-id",
    ),
    "cloud-init-docs-aliyun-versions.txt": ("2016-01-01", "latest"),
}


def test_every_sample_has_an_expectation():
    names = {p.name for p in corpus_files("metadata")}
    assert names, "corpus missing: tests/fixtures/samples"
    assert names == set(EXPECTED)


@pytest.mark.parametrize("path", corpus_files("metadata"), ids=lambda p: p.name)
def test_listing(path):
    assert metadata.parse_listing(path.read_text()) == EXPECTED[path.name]


def test_vswitch_id_only_in_newer_listing():
    files = {p.name: p for p in corpus_files("metadata")}
    assert files, "corpus missing: tests/fixtures/samples"
    newer = metadata.parse_listing(
        files["alibaba-blog-curl-latest-meta-data-listing.txt"].read_text()
    )
    older = metadata.parse_listing(
        files["cloud-init-docs-aliyun-2016-01-01-meta-data-listing.txt"].read_text()
    )
    assert "vswitch-id" in newer and "vswitch-id" not in older
    # the default keys other than vswitch-id/zone-id/instance-type are all top-level entries
    for key in ("vpc-id", "region-id", "instance-id", "private-ipv4"):
        assert key in newer and key in older
