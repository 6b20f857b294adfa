"""`expect.gpu.model` must agree with the GPU memory the profile (or the inventory) gives,
`expect.gpu.memory_gb`: a model whose published memory differs is one line naming the key,
exit 4, before any node is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

pytest_plugins = ["pytester"]

HEAD = "cluster: {name: c, region: r}\nnodes:\n  - {name: n1, host: 10.0.0.1}\n"


def inventory(tmp_path: Path, expect: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(HEAD + f"expect: {expect}\n")
    return path


def refused(tmp_path: Path, expect: str) -> list[str]:
    path = inventory(tmp_path, expect)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    return [line.removeprefix(f"{path}: ") for line in str(info.value).splitlines()]


@pytest.mark.parametrize(
    ("profile", "model", "published", "profile_gb"),
    [
        ("ebmgn8v", "NVIDIA L20", "48", "96"),  # the model's published memory (NV-LGPU)
        ("ebmgn7ex", "NVIDIA A100-SXM4-40GB", "40", "80"),  # the size nvidia-smi's name carries
        ("lab", "NVIDIA H20", "96", "141"),
        ("ebmgn8is", "NVIDIA H200", "141", "48"),
        ("gn9gc", "NVIDIA H100 80GB HBM3", "80", "72"),
    ],
)
def test_a_model_that_contradicts_the_profiles_memory_is_one_line(
    tmp_path, profile, model, published, profile_gb
):
    (line,) = refused(tmp_path, f"{{profile: {profile}, gpu: {{model: '{model}'}}}}")
    assert line.startswith("expect.gpu.model: "), line
    assert model in line and f"{published} GB" in line, line
    assert f"expect.gpu.memory_gb is {profile_gb}" in line and f"profile {profile}" in line, line


def test_an_inventory_memory_that_contradicts_the_profiles_model_is_refused(tmp_path):
    (line,) = refused(tmp_path, "{profile: ebmgn8is, gpu: {memory_gb: 96}}")
    assert line.startswith("expect.gpu.memory_gb: "), line
    assert "'NVIDIA L20' (profile ebmgn8is) has 48 GB" in line, line
    assert "expect.gpu.memory_gb is 96 (inventory)" in line, line


@pytest.mark.parametrize(
    ("profile", "model"),
    [
        ("ebmgn7ex", "NVIDIA A800-SXM4-80GB"),
        ("ebmgn7ex", "NVIDIA A100-SXM4-80GB"),
        ("ebmgn8v", "NVIDIA H20"),
        ("ebmgn8v", "nvidia  h20"),  # case and spacing ignored, as the judge does
        ("gn9gc", "NVIDIA RTX PRO 5000 Blackwell"),
        ("ebmgn8is", "NVIDIA L20"),
        ("lab", "NVIDIA H200"),
        ("ebmgn8v", "NVIDIA L20N"),  # no published memory known: nothing to contradict
    ],
)
def test_a_model_that_agrees_or_is_unknown_loads(tmp_path, profile, model):
    path = inventory(tmp_path, f"{{profile: {profile}, gpu: {{model: '{model}'}}}}")
    assert load_inventory(path).expect.gpu.model == model


def test_the_inventory_may_set_both_when_the_profile_is_wrong(tmp_path):
    path = inventory(tmp_path, "{profile: ebmgn8v, gpu: {model: NVIDIA L20, memory_gb: 48}}")
    assert load_inventory(path).expect.gpu.memory_gb == 48


def test_every_shipped_profile_agrees_with_itself(tmp_path):
    from pytest_hpcnet.inventory.expectations import profile_names

    for profile in profile_names():
        load_inventory(inventory(tmp_path, f"{{profile: {profile}}}"))


def test_a_contradicting_model_is_exit_4_in_one_line(pytester):
    pytester.makefile(".yaml", inv=HEAD + "expect: {profile: ebmgn8v, gpu: {model: NVIDIA L20}}\n")
    result = pytester.runpytest("--hpcnet-inventory", "inv.yaml", "--hpcnet-reports-dir", "o")
    assert result.ret == 4
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()
    (line,) = [ln for ln in result.stderr.lines if "expect.gpu.model" in ln]
    assert "'NVIDIA L20'" in line and "96" in line
