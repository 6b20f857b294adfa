"""The plugin through pytester: ids per node, skip without inventory, usage errors, summary."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

INVENTORY = """\
cluster: {name: unit-cluster, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "gpu-[1-3]", host: "198.18.0.[201-203]"}
"""

SUITE = """\
import pytest

@pytest.mark.static
def test_per_node(node):
    assert node.name.startswith("gpu-")

def test_per_pair(node_pair):
    a, b = node_pair
    assert a.name != b.name
"""


def test_ids_per_node_and_pair(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--collect-only", "-q", "--strict-markers"
    )
    result.stdout.fnmatch_lines(
        [
            "test_suite.py::test_per_node[gpu-1]",
            "test_suite.py::test_per_node[gpu-2]",
            "test_suite.py::test_per_node[gpu-3]",
            "test_suite.py::test_per_pair[gpu-1->gpu-2]",
            "test_suite.py::test_per_pair[gpu-3->gpu-1]",
        ]
    )
    assert result.ret == 0


def test_runs_and_summarises_without_contacting_nodes(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "-m", "static", "--reports-dir", "out"
    )
    result.assert_outcomes(passed=3, deselected=1)  # the pair test, once (not per pair)
    result.stdout.fnmatch_lines(
        [
            "*cluster unit-cluster (cn-test): 3 nodes",
            "nodes reached: not contacted; unreachable: 0",
            "checks: 3 passed, 0 failed, 0 errors, 0 waived, 0 skipped",
            "verdict: INCOMPLETE (selected checks, not a handover certificate)",
            "reports: out/*/ (certificate.html, evidence.jsonl)",
        ]
    )


def test_reports_disk_too_full_is_one_clear_error_before_any_test(pytester, monkeypatch):
    import shutil

    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    full = shutil.disk_usage(pytester.path)._replace(free=5 * 1024 * 1024)
    monkeypatch.setattr("pytest_hpcnet.session.shutil.disk_usage", lambda path: full)
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: reports directory out/* has 5 MB free; a run on 3 nodes needs at least 64 MB*"]
    )
    assert "Traceback" not in result.stderr.str()
    assert list((pytester.path / "out").iterdir()) == []  # no half-made run folder


def test_free_space_floor_grows_with_the_cluster(tmp_path):
    from pytest_hpcnet.session import free_space_problem

    assert free_space_problem(tmp_path, 3) is None  # the test machine has 64 MB to spare
    problem = free_space_problem(tmp_path, 10**8)  # 512 KiB per node: about 48 TiB
    assert problem is not None and "a run on 100000000 nodes needs at least 50000000 MB" in problem


def test_skips_without_inventory(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE + "\ndef test_unrelated():\n    assert True\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*no cluster inventory: run with --inventory PATH*"])


def test_ini_option_names_the_inventory(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makeini("[pytest]\nhpcnet_inventory = inv.yaml\n")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(".", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_suite.py::test_per_node[gpu-3]"])


def test_no_paths_runs_the_shipped_suites_whatever_the_folder_holds(pytester: pytest.Pytester):
    """`pytest --inventory x.yaml` runs the acceptance suites, not the folder's own tests
    nor its `testpaths`; the same with `hpcnet_inventory` in the ini file."""
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makeini("[pytest]\ntestpaths = unrelated\n")
    pytester.mkdir("unrelated")
    pytester.makepyfile(**{"unrelated/test_unrelated": "def test_x():\n    pass\n"})
    pytester.makepyfile(test_here="def test_y():\n    pass\n")
    result = pytester.runpytest("--inventory", "inv.yaml", "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "pytest_hpcnet/suites/test_mtu.py::test_interface_mtu_is_expected[gpu-1]",
            "pytest_hpcnet/suites/test_reachability.py::test_node_answers_over_ssh[[]gpu-3]",
        ]
    )
    assert "test_unrelated" not in result.stdout.str()
    assert "test_here" not in result.stdout.str()
    pytester.makeini("[pytest]\nhpcnet_inventory = inv.yaml\n")
    again = pytester.runpytest("--collect-only", "-q", "-m", "static")
    again.stdout.fnmatch_lines(
        ["pytest_hpcnet/suites/test_mtu.py::test_interface_mtu_is_expected[gpu-3]"]
    )
    assert "test_here" not in again.stdout.str()


def test_explicit_paths_run_a_sites_own_checks_and_can_add_the_shipped_ones(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_site=SUITE)
    own = pytester.runpytest("test_site.py", "--inventory", "inv.yaml", "--collect-only", "-q")
    own.stdout.fnmatch_lines(["test_site.py::test_per_node[gpu-1]"])
    assert "test_mtu.py" not in own.stdout.str()
    both = pytester.runpytest(
        "--inventory", "inv.yaml", "--collect-only", "-q", "--pyargs", "pytest_hpcnet.suites", "."
    )
    both.stdout.fnmatch_lines(["*test_mtu.py::test_interface_mtu_is_expected[[]gpu-1]"])
    both.stdout.fnmatch_lines(["test_site.py::test_per_node[gpu-1]"])


def test_plugin_loads_without_pytest_xdist(pytester: pytest.Pytester):
    """An environment without xdist (the runtime dependencies only): any pytest run, in any
    project, still works with the plugin installed."""
    pytester.makepyfile(test_unrelated="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:xdist.looponfail")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert result.ret == 0


def test_bad_inventory_is_a_usage_error_without_traceback(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY.replace("region:", "regoin:"))
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(".", "--inventory", "inv.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "cluster.regoin: unknown key (did you mean 'region'?)" in text
    assert "Traceback" not in text
    assert "inv.yaml" in text


def test_unreachable_node_fails_fast_with_reason(pytester: pytest.Pytester):
    """A node whose name does not resolve: its test fails with the DNS reason, once."""
    pytester.makefile("", kh="")
    pytester.makefile(
        ".yaml",
        inv="""\
cluster: {name: c, region: r}
ssh: {connect_timeout_s: 1, connect_retries: 1, known_hosts: kh}
nodes:
  - {name: ghost, host: no-such-host.invalid}
""",
    )
    pytester.makepyfile(
        test_suite="""\
def test_answers(cluster, node):
    cluster.facts(node)
"""
    )
    result = pytester.runpytest(".", "--inventory", "inv.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ghost unreachable: DNS: cannot resolve 'no-such-host.invalid'*"])
    result.stdout.fnmatch_lines(["nodes reached: 0/1; unreachable: 1"])


def test_loading_the_plugin_imports_no_run_machinery():
    """pytest loads the plugin in every project that has it installed: without an inventory
    it must not pay for SSH, pydantic or the report stack at start-up."""
    import subprocess
    import sys

    heavy = ("paramiko", "fabric", "pydantic", "jinja2", "pytest_hpcnet.session")
    code = "import sys, pytest_hpcnet.plugin; print([m for m in %r if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code % (heavy,)], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


SUITE_RULED_OUT = """\
import pytest
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

@pytest.mark.static
@mark("erdma")
@not_applicable_when(
    lambda expect: expect.rdma.compat_mode is None, "not applicable: no compat_mode expected"
)
def test_compat_mode(node):
    raise AssertionError("a ruled-out test never runs")

@pytest.mark.static
@mark("mtu")
@not_applicable_when(lambda expect: not expect.mtu, "not applicable: no MTU expected")
def test_mtu_expected(node):
    assert node.name.startswith("gpu-")
"""


def test_a_test_the_expectations_rule_out_is_one_skipped_item_not_one_per_node(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE_RULED_OUT)
    args = (".", "--inventory", "inv.yaml", "--strict-markers")
    collected = pytester.runpytest(*args, "--collect-only", "-q")
    collected.stdout.fnmatch_lines(
        [
            "test_suite.py::test_compat_mode[all-nodes]",
            "test_suite.py::test_mtu_expected[gpu-1]",
            "test_suite.py::test_mtu_expected[gpu-2]",
            "test_suite.py::test_mtu_expected[gpu-3]",
            "4 tests collected*",
        ]
    )
    result = pytester.runpytest(*args, "--reports-dir", "out", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED ?1? *: not applicable: no compat_mode expected"])
    (run,) = (pytester.path / "out").iterdir()
    records = [json.loads(line) for line in (run / "evidence.jsonl").read_text().splitlines()]
    ruled_out = [r for r in records if r["check_id"] == "erdma"]
    assert [(r["subject"], r["verdict"], r["message"]) for r in ruled_out] == [
        ("all-nodes", "skipped", "not applicable: no compat_mode expected")
    ]
    summary = json.loads((run / "summary.json").read_text())
    assert [(e["check_id"], e["kind"]) for e in summary["scope"]["excluded"]] == [
        ("erdma", "not_applicable")
    ]


def test_a_not_applicable_reason_says_so():
    from pytest_hpcnet.requirements.registry import not_applicable_when

    with pytest.raises(ValueError, match="not applicable: "):
        not_applicable_when(lambda expect: True, "no compat_mode expected")


def test_what_collection_built_is_frozen_out_of_the_garbage_collectors_walks(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(
        test_suite="import gc\n\ndef test_frozen(node):\n    assert gc.get_freeze_count() > 1000\n"
    )
    result = pytester.runpytest_subprocess(".", "--inventory", "inv.yaml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


PAIRS_AND_FLOWS = """\
import pytest

@pytest.mark.check("path_mtu", "Path MTU")
def test_pair(node_pair, check):
    assert node_pair

@pytest.mark.check("acl", "ACL")
def test_flow(acl_flow, check):
    assert acl_flow
"""


def test_one_node_and_no_flows_are_not_applicable_not_a_crash(pytester: pytest.Pytester):
    pytester.makefile(
        ".yaml",
        inv=INVENTORY.replace(
            '"gpu-[1-3]", host: "198.18.0.[201-203]"', "gpu-1, host: 198.18.0.201"
        ),
    )
    pytester.makepyfile(test_suite=PAIRS_AND_FLOWS)
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out", "-rs")
    result.assert_outcomes(skipped=2)
    assert (
        "TypeError" not in result.stdout.str() and "empty parameter set" not in result.stdout.str()
    )
    (run,) = (pytester.path / "out").iterdir()
    records = [json.loads(x) for x in (run / "evidence.jsonl").read_text().splitlines()]
    assert sorted((r["check_id"], r["verdict"]) for r in records) == [
        ("acl", "skipped"),
        ("path_mtu", "skipped"),
    ]
    assert all(r["message"].startswith("not applicable: ") for r in records)
    scope = json.loads((run / "summary.json").read_text())["scope"]
    assert scope["incomplete"] == [] and {e["kind"] for e in scope["excluded"]} == {
        "not_applicable"
    }


OTHER_PLUGIN = """\
def pytest_addoption(parser):
    parser.addoption("--inventory", dest="ansible_inventory", help="pytest-ansible's own")
"""


def test_another_plugin_owning_inventory_does_not_stop_pytest(pytester: pytest.Pytester):
    pytester.makepyfile(ansible_like=OTHER_PLUGIN, test_unrelated="def test_x():\n    pass\n")
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "ansible_like", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stderr.str()
    result.assert_outcomes(passed=1)
    pytester.makefile(".yaml", inv=INVENTORY)
    ours = pytester.runpytest_subprocess(
        "-p",
        "ansible_like",
        "--hpcnet-inventory",
        "inv.yaml",
        "--collect-only",
        "-q",
        "--hpcnet-reports-dir",
        "out",
        "test_unrelated.py",
    )
    assert ours.ret == 0, ours.stderr.str()


def test_the_short_spellings_work_where_no_one_else_owns_them(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "out", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(["test_suite.py::test_per_node[gpu-1]"])


def test_a_test_that_m_deselects_is_collected_once(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "-m", "not static", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(
        ["test_suite.py::test_per_pair[gpu-1->gpu-2]", "3/4 tests*(1 deselected)*"]
    )
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "-m", "static", "--co", "-q")
    result.stdout.fnmatch_lines(
        ["test_suite.py::test_per_node[gpu-3]", "3/4 tests*(1 deselected)*"]
    )
