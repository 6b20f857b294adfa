"""Node sources: Ansible (INI, YAML) and `terraform output -json`, directly or by nodes_from."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory
from pytest_hpcnet.inventory.sources import (
    InventorySourceError,
    detect_kind,
    expand_ansible_range,
    read_ansible,
    read_terraform,
)
from tests.conftest import make_ssh_home

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "inventory_sources"
GPU = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
ALL = ["bastion", *GPU, "cpfs-client-a", "cpfs-client-b"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --- detection --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("hosts.ini", "ansible"),
        ("hosts.yml", "ansible"),
        ("tf-output.json", "terraform"),
        ("tf-output-map.json", "terraform"),
        ("cluster-ansible.yaml", "native"),
        ("cluster-terraform.yaml", "native"),
    ],
)
def test_detects_the_kind_of_each_fixture(name, kind):
    path = FIXTURES / name
    assert detect_kind(path, path.read_text()) == kind


def test_detection_by_content():
    assert detect_kind(Path("hosts"), "[gpu]\nn1\nn2\n") == "ansible"  # INI without suffix
    assert detect_kind(Path("hosts"), "n1 ansible_host=10.0.0.1\n") == "ansible"
    assert detect_kind(Path("tf"), json.dumps({"o": {"value": []}})) == "terraform"
    assert detect_kind(Path("inv.yaml"), "[gpu]\n") == "native"  # .yaml is never INI
    assert detect_kind(Path("inv.yaml"), "nodez: []\n") == "native"  # typos stay native errors
    assert detect_kind(Path("inv.yaml"), "all: {hosts: {n1: }}\n") == "ansible"
    assert detect_kind(Path("inv.yaml"), "cluster: {}\nall: {hosts: {}}\n") == "native"
    assert detect_kind(Path("inv.json"), '{"cluster": {"name": "c"}}') == "native"
    assert detect_kind(ROOT / "inventories" / "example.yaml", "") == "native"


# --- Ansible ----------------------------------------------------------------------------


@pytest.mark.usefixtures("ssh_home")
def test_ansible_ini_given_directly():
    inv = load_inventory(FIXTURES / "hosts.ini")
    assert (inv.cluster.name, inv.cluster.region) == ("hosts", "unknown")
    assert [n.name for n in inv.nodes] == ALL
    assert inv.ssh.user == "ubuntu"  # [all:vars]
    assert inv.ssh.host_key_policy == "strict"
    assert inv.expect.profile is None and inv.expect.mtu == 8500  # default expectations
    bastion, gpu01, gpu05 = inv.node("bastion"), inv.node("gpu01"), inv.node("gpu05")
    assert (bastion.host, bastion.ssh.user, bastion.labels) == ("203.0.113.10", "ops", [])
    assert gpu01.host == "gpu01"  # no ansible_host: the name (DNS or ~/.ssh/config)
    assert gpu01.ssh.user == "root" and gpu01.ssh.identity_file == "~/.ssh/gpu_ed25519"
    assert gpu01.labels == ["gpu", "training"]  # direct group and parent group
    assert (gpu05.host, gpu05.ssh.port, gpu05.ssh.user) == ("10.0.1.25", 2222, None)
    assert gpu05.interface == "eth1"  # hpcnet_interface
    assert inv.node("cpfs-client-b").labels == ["storage", "training"]
    assert len(inv.sha256) == 64


@pytest.mark.usefixtures("ssh_home")
def test_ansible_yaml_gives_the_same_nodes_as_ini():
    ini = load_inventory(FIXTURES / "hosts.ini")
    yml = load_inventory(FIXTURES / "hosts.yml")
    assert [n.model_dump() for n in yml.nodes] == [n.model_dump() for n in ini.nodes]
    assert yml.ssh == ini.ssh


@pytest.mark.parametrize(
    ("group", "names"),
    [
        ("gpu", GPU),
        ("training", [*GPU, "cpfs-client-a", "cpfs-client-b"]),
        ("storage", ["cpfs-client-a", "cpfs-client-b"]),
        ("ungrouped", ["bastion"]),
        ("all", ALL),
    ],
)
@pytest.mark.parametrize("source", ["hosts.ini", "hosts.yml"])
def test_group_selection_includes_children(source, group, names):
    found = read_ansible(FIXTURES / source, group)
    assert [n["name"] for n in found.nodes] == names
    assert found.ssh == {"user": "ubuntu"}


@pytest.mark.usefixtures("ssh_home")
def test_nodes_from_ansible_keeps_cluster_ssh_and_expectations():
    inv = load_inventory(FIXTURES / "cluster-ansible.yaml")
    assert inv.cluster.name == "prod-h800"
    assert [n.name for n in inv.nodes] == GPU
    assert inv.ssh.user == "root"  # the inventory's ssh: wins over [all:vars]
    assert inv.ssh.connect_timeout_s == 5 and inv.ssh.host_key_policy == "accept-new"
    assert inv.node("gpu02").ssh.user == "root"
    assert inv.node("gpu05").ssh.port == 2222  # host vars stay per-node overrides
    assert inv.expect.profile == "ebmgn8is"
    assert inv.expect.ib_write_bw.bound_gbps == pytest.approx(64.0)  # ebmgn8is: 80 per ERI - 20 %


@pytest.mark.usefixtures("ssh_home")
def test_nodes_from_digest_covers_the_source(tmp_path):
    for name in ("cluster-ansible.yaml", "hosts.ini"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    before = load_inventory(tmp_path / "cluster-ansible.yaml").sha256
    with (tmp_path / "hosts.ini").open("a") as f:
        f.write("\n[gpu]\ngpu06\n")
    after = load_inventory(tmp_path / "cluster-ansible.yaml")
    assert after.sha256 != before
    assert after.nodes[-1].name == "gpu06"


def test_ansible_ranges_ports_and_comments(tmp_path):
    path = write(
        tmp_path,
        "hosts",
        """\
        ; a comment
        [gpu]
        gpu-[08:11]
        gpu-[1:5:2]-x
        rack[a:b]-n[1:2]
        10.0.0.7:2200
        "quoted" ansible_host="10.0.0.8"  # trailing comment
        [gpu:vars]
        ansible_user = 'ops'
        """,
    )
    nodes = read_ansible(path, "gpu").nodes
    assert [n["name"] for n in nodes] == [
        "gpu-08", "gpu-09", "gpu-10", "gpu-11",
        "gpu-1-x", "gpu-3-x", "gpu-5-x",
        "racka-n1", "racka-n2", "rackb-n1", "rackb-n2",
        "10.0.0.7", "quoted",
    ]  # fmt: skip
    assert nodes[-2]["ssh"] == {"port": 2200, "user": "ops"}
    assert nodes[-1]["host"] == "10.0.0.8"


def test_expand_ansible_range():
    assert expand_ansible_range("n") == ["n"]
    assert expand_ansible_range("n[9:11]") == ["n9", "n10", "n11"]
    assert expand_ansible_range("n[009:011]") == ["n009", "n010", "n011"]
    assert expand_ansible_range("[a:c]x") == ["ax", "bx", "cx"]
    for bad in ("n[3:1]", "n[01:100]", "n[1-3]", "n[a:3]", "n[0:99999]", "n[1:9:0]"):
        with pytest.raises(InventorySourceError):
            expand_ansible_range(bad)


# --- Terraform --------------------------------------------------------------------------


def test_terraform_list_given_directly():
    inv = load_inventory(FIXTURES / "tf-output.json")
    assert (inv.cluster.name, inv.cluster.region) == ("tf-output", "unknown")
    assert [(n.name, n.host) for n in inv.nodes] == [
        ("gpu-001", "192.168.10.11"),
        ("gpu-002", "192.168.10.12"),
        ("gpu-003", "192.168.10.13"),
    ]
    assert inv.node("gpu-001").labels == ["a100"]
    assert inv.node("gpu-003").interface == "eth1"


def test_nodes_from_terraform_map_with_output_name():
    inv = load_inventory(FIXTURES / "cluster-terraform.yaml")
    assert (inv.cluster.name, inv.expect.profile) == ("tf-lab", "lab")
    assert [(n.name, n.host) for n in inv.nodes] == [("gpu-a", "10.0.0.21"), ("gpu-b", "10.0.0.22")]


def test_terraform_bare_value(tmp_path):
    """`terraform output -json hpcnet_nodes` prints the value alone: list or map."""
    listed = write(tmp_path, "a.json", '[{"name": "n1", "host": "10.0.0.1"}]')
    mapped = write(tmp_path, "b.json", '{"n1": "10.0.0.1", "n2": "10.0.0.2"}')
    assert read_terraform(listed).nodes == [{"name": "n1", "host": "10.0.0.1"}]
    assert [n.name for n in load_inventory(mapped).nodes] == ["n1", "n2"]


# --- errors -----------------------------------------------------------------------------

INI = "[gpu]\ngpu01 ansible_host=10.0.0.1\n[cpu]\n"
TF = {"hpcnet_nodes": {"value": [{"name": "n1", "host": "10.0.0.1"}]}}

# (file name, content, problem expected in the one-line message)
BAD_DIRECT = {
    "malformed-ini-line": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_host\n",
        "line 2: malformed host line",
    ),
    "malformed-section": ("hosts.ini", "[gpu:kids]\ngpu01\n", "line 1: malformed section"),
    "unclosed-section": ("hosts.ini", "[gpu\ngpu01\n", "line 1: malformed section header"),
    "unbalanced-quote": ("hosts.ini", "[gpu]\ngpu01 a='b\n", "line 2: malformed line"),
    "bad-vars-line": ("hosts.ini", "[gpu:vars]\njust words\n", "line 2: [gpu:vars] lines are"),
    "bad-children-line": ("hosts.ini", "[a:children]\nb c\n", "line 2: [a:children] lines name"),
    "own-child": ("hosts.ini", "[a:children]\na\n", "line 2: group 'a' is its own child"),
    "bad-range": ("hosts.ini", "[gpu]\ngpu[5:1]\n", "line 2: host pattern 'gpu[5:1]'"),
    "dash-range": ("hosts.ini", "[gpu]\ngpu[1-3]\n", "a range is written [start:end]"),
    "jinja": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_host=\"{{ lookup('env', 'IP') }}\"\n",
        "line 2: ansible_host uses Jinja templating",
    ),
    "jinja-unquoted": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_host={{ ip }}\n",
        "line 2: malformed host line: expected key=value after the host, got 'ip'; Jinja",
    ),
    "jinja-group-var": (
        "hosts.ini",
        "[gpu]\ngpu01\n[gpu:vars]\nansible_user={{ user }}\n",
        "line 4: ansible_user uses Jinja templating",
    ),
    "bad-port": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_port=ssh\n",
        "line 2: ansible_port is not a port",
    ),
    "port-range": ("hosts.ini", "[gpu]\ngpu01 ansible_port=70000\n", "ansible_port is not a port"),
    "shell-in-host": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_host='h$(id)'\n",
        "[0].host 'h$(id)' is not a host name",
    ),
    "option-like-host": (
        "hosts.ini",
        "[gpu]\ngpu01 ansible_host=-oProxyCommand=x\n",
        "is not a host name or address",
    ),
    "bad-name": ("hosts.ini", "[gpu]\nn;reboot\n", "is not a valid node name"),
    "bad-interface": ("hosts.ini", "n1 hpcnet_interface='eth0;x'\n", "is not a Linux interface"),
    "stray-word": ("hosts.ini", "[a]\nn[1:2]\n[b]\nn[1:3] a=b c\n", "line 4: malformed host line"),
    "no-hosts": ("hosts.ini", "[gpu]\n", "group 'all' has no hosts"),
    "yaml-group-key": ("hosts.yml", "all: {hostz: {n1: }}\n", "all.hostz: unknown key"),
    "yaml-hosts-list": ("hosts.yml", "all: {hosts: [n1]}\n", "all.hosts: expected a mapping"),
    "yaml-jinja": (
        "hosts.yml",
        "all: {hosts: {n1: {ansible_user: '{{ u }}'}}}\n",
        "all.hosts.n1.ansible_user: ansible_user uses Jinja",
    ),
    "yaml-bool-user": (
        "hosts.yml",
        "all: {hosts: {n1: {ansible_user: true}}}\n",
        "all.hosts.n1.ansible_user: ansible_user must be a string",
    ),
    "yaml-duplicate": ("hosts.yml", "all: {hosts: {n1: , n1: }}\n", "duplicate key 'n1'"),
    "yaml-syntax": ("hosts.yml", "all: {hosts: [\n", "YAML syntax error"),
    "yaml-self-nested": (
        "hosts.yml",
        "a: {children: {b: {children: {a: {hosts: {n1: }}}}}}\n",
        "group 'a' is nested in itself",
    ),
    "tf-missing-output": (
        "tf.json",
        json.dumps({"vpc_id": {"value": "vpc-1"}}),
        "hpcnet_nodes: no such output (outputs: vpc_id)",
    ),
    "tf-missing-host": (
        "tf.json",
        json.dumps({"hpcnet_nodes": {"value": [{"name": "n1"}]}}),
        "hpcnet_nodes.value[0].host: required key is missing",
    ),
    "tf-unknown-key": (
        "tf.json",
        json.dumps({"hpcnet_nodes": {"value": [{"name": "n1", "hots": "h"}]}}),
        "hpcnet_nodes.value[0].hots: unknown key",
    ),
    "tf-map-non-string": (
        "tf.json",
        json.dumps({"hpcnet_nodes": {"value": {"n1": ["10.0.0.1"]}}}),
        "hpcnet_nodes.value.n1: expected an address string",
    ),
    "tf-empty": ("tf.json", json.dumps({"hpcnet_nodes": {"value": []}}), "value: no nodes"),
    "tf-scalar": (
        "tf.json",
        json.dumps({"hpcnet_nodes": {"value": "10.0.0.1"}}),
        "expected a list of {name, host} objects or a map",
    ),
    "tf-duplicate": (
        "tf.json",
        json.dumps({"hpcnet_nodes": {"value": [{"name": "n", "host": "a"}] * 2}}),
        "duplicate node name 'n'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_DIRECT))
def test_bad_source_given_directly_gives_one_line(tmp_path, case):
    name, text, expected = BAD_DIRECT[case]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


NATIVE = "cluster: {name: c, region: r}\n"

# (inventory tail after NATIVE, extra files, problem expected)
BAD_NODES_FROM = {
    "unknown-group": (
        "nodes_from: {ansible: hosts.ini, group: gpus}\n",
        {"hosts.ini": INI},
        "hosts.ini: unknown group 'gpus' (did you mean 'gpu'? groups: all, gpu, cpu)",
    ),
    "empty-group": (
        "nodes_from: {ansible: hosts.ini, group: cpu}\n",
        {"hosts.ini": INI},
        "hosts.ini: group 'cpu' has no hosts",
    ),
    "missing-output": (
        "nodes_from: {terraform: tf.json, output: nodes}\n",
        {"tf.json": json.dumps(TF)},
        "tf.json: nodes: no such output (outputs: hpcnet_nodes)",
    ),
    "not-tf-output": (
        "nodes_from: {terraform: tf.json}\n",
        {"tf.json": json.dumps({"hpcnet_nodes": {"val": 1}})},
        "hpcnet_nodes: not `terraform output -json`",
    ),
    "tf-syntax": (
        "nodes_from: {terraform: tf.json}\n",
        {"tf.json": '{"hpcnet_nodes": \n'},
        "tf.json: line 2, column 1: JSON syntax error",
    ),
    "ansible-yaml-list": (
        "nodes_from: {ansible: hosts.yml}\n",
        {"hosts.yml": "- a\n"},
        "hosts.yml: expected a mapping of Ansible groups; got list",
    ),
    "missing-file": (
        "nodes_from: {ansible: nowhere.ini}\n",
        {},
        "nowhere.ini: cannot read Ansible inventory",
    ),
    "both": (
        "nodes_from: {ansible: hosts.ini}\nnodes: [{name: n1}]\n",
        {"hosts.ini": INI},
        "nodes: give nodes or nodes_from, not both",
    ),
    "neither": ("ssh: {user: root}\n", {}, "nodes: required key is missing (or give nodes_from"),
    "two-sources": (
        "nodes_from: {ansible: a.ini, terraform: t.json}\n",
        {},
        "nodes_from: give exactly one of ansible: PATH or terraform: PATH",
    ),
    "group-with-terraform": (
        "nodes_from: {terraform: t.json, group: gpu}\n",
        {},
        "nodes_from: group applies to ansible: only",
    ),
    "typo": (
        "nodes_from: {ansibel: hosts.ini}\n",
        {},
        "nodes_from.ansibel: unknown key (did you mean 'ansible'?)",
    ),
    "bad-name-in-source": (
        "nodes_from: {terraform: tf.json}\n",
        {"tf.json": json.dumps({"hpcnet_nodes": {"value": {"n 1": "10.0.0.1"}}})},
        "tf.json: nodes[0].name 'n 1' is not a valid node name",
    ),
    "flow-to-unknown-node": (
        "nodes_from: {ansible: hosts.ini}\n"
        "expect: {flows: {allow: [{source: gpu01, target: gpu09, protocol: tcp, port: 22}]}}\n",
        {"hosts.ini": INI},
        "'gpu09' is not a node of the inventory",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_NODES_FROM))
def test_bad_nodes_from_gives_one_line(tmp_path, case):
    tail, files, expected = BAD_NODES_FROM[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = write(tmp_path, "inv.yaml", NATIVE + tail)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_children_cycle_is_an_error(tmp_path):
    path = write(tmp_path, "hosts.ini", "[a:children]\nb\n[b:children]\na\n[a]\nn1\n")
    with pytest.raises(InventorySourceError, match=r"children form a cycle \(a -> b -> a\)"):
        read_ansible(path, "a")


# --- fuzzing: any input loads or gives one line -----------------------------------------

INI_LINES = st.lists(
    st.one_of(
        st.sampled_from(
            ["[gpu]", "[gpu:vars]", "[all:children]", "[x:y]", "[", "#c", "", "gpu", "n[1:3]"]
        ),
        st.text(alphabet="ab01[]:=#;'\" {}$-", max_size=20),
    ),
    max_size=12,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=INI_LINES)
def test_any_ini_loads_or_gives_one_line_per_problem(tmp_path, lines):
    path = tmp_path / "fuzz.ini"
    path.write_text("\n".join(lines))
    try:
        load_inventory(path)
    except InventoryError as exc:
        assert all(line.startswith(f"{path}: ") for line in str(exc).splitlines())


YAML_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(["n1", "{{ x }}", "[1:2]"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                ["hosts", "children", "vars", "all", "gpu", "ansible_port", "n1", "a\nb"]
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=15,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=YAML_VALUES, output=st.sampled_from(["hpcnet_nodes", "other", "x\ny"]))
def test_any_yaml_or_json_loads_or_gives_one_line_per_problem(tmp_path, tree, output):
    for name, text in (
        ("fuzz.yml", yaml.safe_dump({"all": tree})),
        ("fuzz.json", json.dumps({output: {"value": tree}})),
    ):
        path = tmp_path / name
        path.write_text(text)
        try:
            load_inventory(path)
        except InventoryError as exc:
            assert all(line.startswith(f"{path}: ") for line in str(exc).splitlines())


# --- the plugin -------------------------------------------------------------------------


def test_plugin_takes_an_ansible_inventory_directly(pytester: pytest.Pytester):
    make_ssh_home(pytester.path)  # pytester's HOME
    shutil.copy(FIXTURES / "hosts.ini", pytester.path / "hosts.ini")
    pytester.makepyfile(test_suite="def test_per_node(node):\n    assert node.host\n")
    result = pytester.runpytest(".", "--inventory", "hosts.ini", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_suite.py::test_per_node[bastion]", "*cpfs-client-b*"])
    assert result.ret == 0


def test_a_key_holding_a_newline_still_gives_one_line(tmp_path):
    path = write(tmp_path, "inv.yaml", NATIVE + 'nodes: [{name: n1}]\nexpect: {"a\\nb": 1}\n')
    with pytest.raises(InventoryError, match=r"expect\.a\\nb: unknown key"):
        load_inventory(path)
