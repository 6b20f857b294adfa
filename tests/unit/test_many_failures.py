"""Past FULL_TRACEBACKS_MAX failures pytest's failure summary is left out (its tracebacks
and its per-failure scan of every report take minutes at 1,024 nodes), unless the user
chose a `--tb` style; the FAILED lines and the checks block still name every failure."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_hpcnet.plugin import FULL_TRACEBACKS_MAX, shorten_tracebacks


def config(tbstyle: str, failed: int, errors: int = 0):
    lines: list[str] = []
    terminal = SimpleNamespace(
        stats={"failed": [object()] * failed, "error": [object()] * errors, "passed": [1]},
        write_line=lines.append,
    )
    manager = SimpleNamespace(
        get_plugin=lambda name: terminal if name == "terminalreporter" else None
    )
    return SimpleNamespace(option=SimpleNamespace(tbstyle=tbstyle), pluginmanager=manager), lines


def test_many_failures_leave_out_the_tracebacks_and_say_so():
    cfg, lines = config("auto", FULL_TRACEBACKS_MAX, errors=1)
    shorten_tracebacks(cfg)
    assert cfg.option.tbstyle == "no"
    assert len(lines) == 1 and f"{FULL_TRACEBACKS_MAX + 1} failures" in lines[0]
    assert "--tb=short or long" in lines[0]


def test_a_few_failures_keep_pytest_s_tracebacks():
    cfg, lines = config("auto", FULL_TRACEBACKS_MAX)
    shorten_tracebacks(cfg)
    assert cfg.option.tbstyle == "auto" and lines == []


def test_a_tb_style_the_user_chose_is_kept():
    for style in ("long", "short", "native", "no"):
        cfg, lines = config(style, 5000)
        shorten_tracebacks(cfg)
        assert cfg.option.tbstyle == style and lines == []


def test_a_run_with_many_failures_names_each_in_one_line(tmp_path):
    """The whole path: the plugin's hook runs before pytest's failure summary."""
    import subprocess
    import sys

    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "cluster: {name: c, region: r}\n"
        "nodes:\n  - {name: node01, host: localhost, connection: local}\n"
    )
    tests = tmp_path / "test_site.py"
    tests.write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('i', range({FULL_TRACEBACKS_MAX + 20}))\n"
        "def test_site(i):\n"
        "    assert i < 0, f'site check {i} failed'\n"
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--inventory"]
    run = subprocess.run(
        [*argv, str(inventory), str(tests), "--hpcnet-reports-dir", str(tmp_path / "reports")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout
    assert f"hpcnet: {FULL_TRACEBACKS_MAX + 20} failures" in out
    assert "= FAILURES =" not in out and "def test_site" not in out
    summary = out[out.index("short test summary info") :]
    assert "FAILED test_site.py::test_site[7] - AssertionError: site check 7 failed" in summary
