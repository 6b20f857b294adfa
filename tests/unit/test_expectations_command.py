"""`hpcnet expectations`: every effective key, its value and its origin."""

from __future__ import annotations

from pytest_hpcnet.cli import main

INVENTORY = """
cluster: {name: c1, region: cn-hangzhou}
ssh: {user: root, identity_file: /nonexistent/key}
nodes:
  - {name: n1, host: 198.18.0.1}
expect:
  profile: ebmgn8v
  mtu: 1500
  ib_write_bw: {min_gbps: 50}
  gpu: {count: 4}
"""


def lines_of(capsys, tmp_path, text: str) -> tuple[int, dict[str, str]]:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    status = main(["expectations", str(path)])
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out if line and not line.startswith(" ")}
    return status, rows


def test_each_key_names_its_origin(capsys, tmp_path):
    status, rows = lines_of(capsys, tmp_path, INVENTORY)
    assert status == 0
    assert rows["mtu"].endswith("1500  [inventory]")
    assert rows["gpu.count"].endswith("4  [inventory]")
    assert rows["gpu.persistence"].endswith("true  [profile ebmgn8v]")  # merged key by key
    assert rows["erdma.eris"].endswith("2  [profile ebmgn8v]")
    assert rows["ib_write_lat.max_avg_us"].endswith("[default]")


def test_an_ib_write_bw_block_replaces_the_profiles_whole(capsys, tmp_path):
    _, rows = lines_of(capsys, tmp_path, INVENTORY)
    assert rows["ib_write_bw.min_gbps"].endswith("50.0  [inventory]")
    assert "[profile" not in rows["ib_write_bw.max_gbps"]  # the profile's 176 is gone too
    reference = [v for k, v in rows.items() if k.startswith("ib_write_bw.reference.")]
    assert not any("[profile" in v for v in reference)


def test_the_profiles_sources_follow(capsys, tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    main(["expectations", str(path)])
    out = capsys.readouterr().out
    assert "sources of the profile's values (profile ebmgn8v):" in out
    assert "\n  erdma: " in out


def test_a_bad_expectation_is_one_line_and_exit_4(capsys, tmp_path):
    status = main(["expectations", str(_write(tmp_path, INVENTORY.replace("1500", "jumbo")))])
    out = capsys.readouterr().out.splitlines()
    assert status == 4
    assert len(out) == 1 and out[0].startswith("hpcnet: expect.mtu")


def _write(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_host_keys_set_from_a_known_good_node_show_their_origin(capsys, tmp_path):
    """docs/inventory.md's recipe: `expect.host` from a known-good node, the offset bound
    the operator's own; the unset ones are `[default]`, the profile's note says what
    judges cpus and memory then (the instance type's figures, ECS-DIT)."""
    text = INVENTORY + "  host: {cpus: 192, memory_gib: 2015, memory_lower: -0.01}\n"
    status, rows = lines_of(capsys, tmp_path, text.replace("  gpu: {count: 4}\n", ""))
    assert status == 0
    assert rows["host.cpus"].endswith("192  [inventory]")
    assert rows["host.memory_lower"].endswith("-0.01  [inventory]")
    assert rows["host.max_time_offset_ms"].endswith("null  [default]")  # none published
    assert rows["host.clocksource"].endswith('"tsc"  [profile ebmgn8v]')
    main(["expectations", str(tmp_path / "inv.yaml")])
    note = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  host: "))
    assert "ecs:DescribeInstanceTypes" in note and "ECS-DIT" in note
