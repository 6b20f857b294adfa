"""Unit tests of the ECS metadata command, parsers and grouping."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_hpcnet.probes import metadata

SECRET = "TOKEN-must-not-leak-7f3a"


def test_token_all_keys(fixture_text):
    facts = metadata.parse_metadata(fixture_text("metadata", "token-all-keys.txt"))
    assert facts.token_used is True
    assert facts.vswitch_id == "vsw-2zeabc123def456ghi789"
    assert facts.vpc_id == "vpc-2ze0abc123def456ghijk"
    assert facts.zone_id == "cn-beijing-l"
    assert facts.region_id == "cn-beijing"
    assert facts.instance_type == "ecs.ebmgn8v.48xlarge"
    assert facts.instance_id == "i-2zeaaaabbbbccccdddd1"
    assert facts.private_ipv4 == "172.16.0.11"
    assert facts.missing == () and facts.problems == ()
    assert facts.value("instance/instance-type") == "ecs.ebmgn8v.48xlarge"


def test_old_version_without_vswitch(fixture_text):
    facts = metadata.parse_metadata(fixture_text("metadata", "old-version-no-vswitch.txt"))
    assert facts.token_used is False
    assert facts.vswitch_id is None
    assert facts.vpc_id == "vpc-old0001"
    assert facts.why_missing("vswitch-id") == "http 404 (key unknown to this metadata version)"
    assert [k for k, _ in facts.missing] == ["vswitch-id"]


def test_unreachable(fixture_text):
    facts = metadata.parse_metadata(fixture_text("metadata", "unreachable.txt"))
    assert facts.values == ()
    assert len(facts.missing) == 7
    assert facts.why_missing("vswitch-id") == "curl exit 28 (http 000): timed out"
    assert "could not connect" in facts.why_missing("zone-id")


@pytest.mark.parametrize("text", ["", "garbage line with spaces", "\x00", "hpcnet: curl not found"])
def test_odd_text(text):
    facts = metadata.parse_metadata(text)
    assert facts.vswitch_id is None
    assert facts.problems


def test_listing_ignores_noise(fixture_text):
    entries = metadata.parse_listing(fixture_text("metadata", "latest-listing-html-noise.txt"))
    assert entries == ("dns-conf/", "instance-id", "instance/", "vswitch-id")
    assert metadata.parse_listing("a\r\nb/\r\n\r\na\r\n") == ("a", "b/")


def test_command_shape():
    cmd = metadata.metadata_command()
    assert "PUT" in cmd
    assert "X-aliyun-ecs-metadata-token-ttl-seconds: 21600" in cmd
    assert "http://100.100.100.200/latest/api/token" in cmd
    assert "X-aliyun-ecs-metadata-token: $tok" in cmd
    assert 'echo "$tok"' not in cmd and "echo $tok" not in cmd
    for key in metadata.DEFAULT_KEYS:
        assert key in cmd
    with pytest.raises(ValueError):
        metadata.metadata_command(keys=["vpc-id; reboot"])


# --- the real snippet against a fake metadata service on loopback -----------------------

VALUES = {
    "vpc-id": "vpc-test01",
    "zone-id": "cn-wulanchabu-c",
    "region-id": "cn-wulanchabu",
    "instance/instance-type": "ecs.ebmgn8v.48xlarge",
    "instance-id": "i-test0001",
    "private-ipv4": "10.1.2.3",
}


DROPPED: set[str] = set()


def _server(hardened: bool) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, code: int, body: str = "") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            ok = self.headers.get(metadata.TOKEN_TTL_HEADER) == "21600"
            if not hardened or self.path != "/latest/api/token" or not ok:
                self._reply(404)
            else:
                self._reply(200, SECRET)

        def do_GET(self) -> None:
            if hardened and self.headers.get(metadata.TOKEN_HEADER) != SECRET:
                self._reply(401)
                return
            key = self.path.removeprefix("/latest/meta-data/")
            if key in DROPPED:  # the connection closes with no reply: curl exit 52
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if key in VALUES:
                self._reply(200, VALUES[key])
            else:
                self._reply(404, "<html>404 Not Found</html>")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/latest/meta-data/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=[True, False], ids=["hardened", "plain"])
def fake_imds(request):
    yield from _server(request.param)


def run_snippet(
    base: str, timeout_s: float = 2, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The metadata snippet run by `sh` against `base`."""
    return subprocess.run(
        ["sh", "-c", metadata.metadata_command(base=base, timeout_s=timeout_s)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_snippet_against_fake_imds(fake_imds, request):
    hardened = request.node.callspec.params["fake_imds"]
    out = run_snippet(fake_imds)
    assert SECRET not in out.stdout and SECRET not in out.stderr
    facts = metadata.parse_metadata(out.stdout)
    assert facts.token_used is hardened
    assert facts.vpc_id == "vpc-test01"
    assert facts.instance_type == "ecs.ebmgn8v.48xlarge"
    assert facts.private_ipv4 == "10.1.2.3"
    assert facts.vswitch_id is None
    assert facts.why_missing("vswitch-id").startswith("http 404")
    assert facts.problems == ()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_snippet_unreachable_service_is_fast_and_explained():
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/latest/meta-data/"
    out = run_snippet(base, timeout_s=1).stdout
    facts = metadata.parse_metadata(out)
    assert facts.token_used is False
    assert facts.values == ()
    assert "could not connect" in facts.why_missing("vswitch-id")
    assert facts.why_missing("private-ipv4") == "skipped: metadata service unreachable"


def _counting_curl(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `curl` logs each call, then runs the real curl."""
    real = shutil.which("curl")
    log = tmp_path / "curl.log"
    shim = tmp_path / "bin" / "curl"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho call >> {log}\nexec {real} "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}, log


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_snippet_runs_curl_twice_for_all_keys(fake_imds, tmp_path):
    env, log = _counting_curl(tmp_path)
    out = run_snippet(fake_imds, env=env).stdout
    assert metadata.parse_metadata(out).vpc_id == "vpc-test01"
    assert len(metadata.DEFAULT_KEYS) == 7
    assert log.read_text().count("call") == 2  # the token, then every key in one curl


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_snippet_names_the_key_whose_request_failed_and_skips_the_rest():
    DROPPED.add("instance/instance-type")
    try:
        for base in _server(hardened=True):
            out = run_snippet(base).stdout
    finally:
        DROPPED.clear()
    facts = metadata.parse_metadata(out)
    assert facts.region_id == "cn-wulanchabu"  # the keys before it were read
    assert facts.why_missing("instance/instance-type").startswith("curl exit 52")
    assert facts.why_missing("instance-id") == "skipped: an earlier request failed"
    assert facts.why_missing("private-ipv4") == "skipped: an earlier request failed"
    assert facts.problems == ()
