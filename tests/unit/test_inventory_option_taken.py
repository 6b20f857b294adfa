"""Beside a plugin that owns `--inventory` (pytest-ansible), `pytest --inventory prod.yaml`
is that plugin's option: the run says in one line to type `--hpcnet-inventory` instead."""

from __future__ import annotations

pytest_plugins = ["pytester"]

OTHER = """\
def pytest_addoption(parser):
    parser.addoption("--inventory", dest="ansible_inventory", help="the other plugin's")
"""
HINT = "hpcnet: --inventory inv.yaml went to another plugin; type --hpcnet-inventory inv.yaml"


def test_an_inventory_another_plugin_took_is_named(pytester):
    pytester.syspathinsert()
    pytester.makepyfile(other_plugin=OTHER, test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "other_plugin", "--inventory", "inv.yaml")
    assert result.ret == 0
    assert result.stdout.lines.count(HINT) == 1, result.stdout.str()


def test_no_hint_with_an_hpcnet_inventory_or_none_given(pytester):
    pytester.syspathinsert()
    pytester.makepyfile(other_plugin=OTHER, test_x="def test_x():\n    pass\n")
    assert "went to another plugin" not in pytester.runpytest("-p", "other_plugin").stdout.str()
