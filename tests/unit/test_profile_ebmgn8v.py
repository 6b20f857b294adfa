"""The ebmgn8v profile and the GPU SKU floors of the cloud profiles: each set number is the
one its source note derives, and a floor left unset is said to be peer-relative only."""

from __future__ import annotations

import pytest

from pytest_hpcnet.inventory.expectations import Expectations, load_profile, load_profile_sources


def expect(name: str) -> Expectations:
    return Expectations(**load_profile(name))


def test_ebmgn8v():
    e = expect("ebmgn8v")
    assert e.instance_types == ["ecs.ebmgn8v.*"]
    assert (e.erdma.eris, e.erdma.per_eri_gbps, e.erdma.per_instance_gbps) == (2, 80, 160)
    assert e.erdma.same_nic_index_gbps is None  # published for ebmgn7ex only
    assert (e.gpu.count, e.gpu.model) == (8, None)
    load = e.gpu_load
    assert (load.min_hbm_gbs, load.nvlink_links, load.nvswitch) == (3000, 18, True)
    assert (load.min_bf16_tflops, load.min_p2p_nvlink_gbs) == (103.6, 300)
    notes = load_profile_sources("ebmgn8v")["gpu_load"]
    assert "0.75 x the 4 TB/s" in notes and "TP-H20" in notes


def test_sku_floors_only_where_a_figure_is_published():
    l20 = expect("ebmgn8is").gpu_load
    assert (l20.min_bf16_tflops, l20.min_hbm_gbs) == (83.6, 648)
    assert pytest.approx(0.7 * 119.5, abs=0.06) == l20.min_bf16_tflops
    assert l20.min_hbm_gbs == 0.75 * 864
    assert not l20.nvswitch and l20.nvlink_links is None and l20.p2p


LOAD_FIGURES = ("bf16_tflops", "tf32_tflops", "hbm_gbs", "node_busbw_gbs")


@pytest.mark.parametrize("name", ["ebmgn7ex", "ebmgn8is", "ebmgn8v", "gn9gc"])
def test_every_load_figure_has_a_floor_below_its_ceiling_with_sources(name):
    """No shipped profile leaves a GPU-load figure to peers alone: each has an absolute floor
    under its physical ceiling, and the GPU pairs a floor for their kind of link."""
    load = expect(name).gpu_load
    for figure in LOAD_FIGURES:
        floor, ceiling = getattr(load, f"min_{figure}"), getattr(load, f"max_{figure}")
        assert floor is not None and 0 < floor < ceiling, (name, figure)
    nvlink = load.nvlink_links or name == "ebmgn7ex"
    pair_floor = load.min_p2p_nvlink_gbs if nvlink else load.min_p2p_pcie_gbs
    assert pair_floor is not None and pair_floor < load.max_p2p_gbs, name
    notes = load_profile_sources(name)
    assert "peer-relative only" not in notes["gpu_load"] and "ceiling" in notes["ceilings"]
