"""The run's scope from the command line and the inventory: handover or partial, exclusions,
lab marking."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.probes.metadata import MetadataFacts
from pytest_hpcnet.run_scope import SUITES, is_lab, selection

pytest_plugins = ["pytester"]


def config(args, markexpr="", keyword="", pyargs=False, deselect=(), lf=False, cwd=SUITES.parent):
    options = {"deselect": list(deselect), "lf": lf}
    return SimpleNamespace(
        option=SimpleNamespace(markexpr=markexpr, keyword=keyword, pyargs=pyargs),
        getoption=lambda name, default=None: options.get(name, default),
        args=list(args),
        invocation_params=SimpleNamespace(dir=Path(cwd)),
    )


def test_the_shipped_suites_alone_are_a_handover():
    assert selection(config([str(SUITES)])) == (True, "handover", "")


def test_a_sites_checks_beside_the_whole_suites_stay_a_handover(tmp_path):
    assert selection(config([str(SUITES), str(tmp_path / "site")]))[0] is True
    pyargs = config(["pytest_hpcnet.suites", "site_checks/"], pyargs=True, cwd=tmp_path)
    assert selection(pyargs)[0] is True


@pytest.mark.parametrize(
    ("kwargs", "label", "text"),
    [
        ({"markexpr": "static"}, "static checks", "-m static"),
        ({"markexpr": "static and not audit"}, "selected checks", "-m 'static and not audit'"),
        ({"keyword": "mtu"}, "selected checks", "-k mtu"),
        ({"markexpr": "static", "keyword": "mtu"}, "selected checks", "-m static -k mtu"),
        ({"lf": True}, "selected checks", "--lf"),
    ],
)
def test_a_marker_or_keyword_makes_a_partial_run(kwargs, label, text):
    assert selection(config([str(SUITES)], **kwargs)) == (False, label, text)


def test_a_file_or_test_of_the_suites_is_a_partial_run(tmp_path):
    one = f"{SUITES}/test_mtu.py::test_mtu_matches[node01]"
    assert selection(config([one])) == (False, "selected checks", one)
    assert selection(config(["pytest_hpcnet.suites.test_mtu"], pyargs=True))[0] is False
    only_site = str(tmp_path / "site_checks")
    assert selection(config([only_site])) == (False, "selected checks", only_site)


def test_lab_signals_cannot_be_hidden_and_a_real_node_is_never_lab():
    inv = SimpleNamespace(
        expect=SimpleNamespace(profile="ebmgn8is"), cluster=SimpleNamespace(region="cn-beijing")
    )
    real = MetadataFacts(
        region_id="cn-beijing",
        instance_id="i-2ze0a1b2c3d4e5f6g7h8",
        instance_type="ecs.ebmgn8is.32xlarge",
    )
    assert not is_lab(inv, {"gpu-1": real})
    renamed_lab = MetadataFacts(region_id="cn-beijing", instance_type="ecs.hpcnet-lab.emulated")
    assert is_lab(inv, {"gpu-1": real, "node01": renamed_lab})
    assert is_lab(inv, {"n": MetadataFacts(region_id="cn-lab")})
    assert is_lab(inv, {"n": MetadataFacts(instance_id="i-lab00001")})
    lab_profile = SimpleNamespace(expect=SimpleNamespace(profile="lab"), cluster=inv.cluster)
    assert is_lab(lab_profile, {})


INVENTORY = """\
cluster: {name: unit-cluster, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "gpu-[1-2]", host: "198.18.0.[201-202]"}
"""


def test_an_unknown_excluded_requirement_is_a_one_line_usage_error(pytester: pytest.Pytester):
    pytester.makefile(
        ".yaml", inv=INVENTORY + "scope: {exclude: [cloud-audit], reason: no credentials}\n"
    )
    result = pytester.runpytest("--inventory", "inv.yaml", "--collect-only", "-q")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*scope.exclude: unknown requirement 'cloud-audit' (valid: reachability, erdma, *)"]
    )


def test_an_exclusion_needs_a_reason(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY + "scope: {exclude: [cloud_audit]}\n")
    result = pytester.runpytest("--inventory", "inv.yaml", "--collect-only", "-q")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*scope.reason*"])


def test_excluded_requirements_are_deselected(pytester: pytest.Pytester):
    pytester.makefile(
        ".yaml", inv=INVENTORY + "scope: {exclude: [cloud_audit, cpfs], reason: not ours}\n"
    )
    result = pytester.runpytest("--inventory", "inv.yaml", "--collect-only", "-q")
    out = result.stdout.str()
    assert "test_cloud_audit.py" not in out and "test_cpfs.py" not in out
    assert "test_mtu.py" in out
