#!/usr/bin/env bash
# The operator's path, as the README's "Running it on a real cluster" tells it, against the lab:
# a wheel built and installed into a fresh venv with [cloud] (the README's commands), and once
# more into a venv with the runtime dependencies only (no test extras, no pytest-xdist). In
# each: an unrelated project's tests still pass with the plugin installed, a bad inventory is
# exit 4 with one line, and `pytest --hpcnet-inventory lab.yaml` from an empty folder runs the shipped
# suites and writes a certificate. Then the static suite with pytest-ansible installed beside it
# (which owns --inventory: ours is --hpcnet-inventory; `--inventory` alone says so), a
# not-measured-heavy `connection: local` run (one line per check, pytest's counts agree with
# the plugin's), and a site's own check beside the shipped suites.
# Run as root after scripts/install.sh (it needs the lab's Debian packages). CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
work=$(mktemp -d /tmp/hpcnet-user-path.XXXXXX)
trap 'rm -rf "$work"' EXIT
step() { printf '\nuser path: %s\n' "$*"; }
fail() { printf 'user path FAILED: %s\n' "$*" >&2; exit 1; }

step "build the wheel with the venv's pip (the README's commands)"
python3 -m venv "$work/venv-cloud"
"$work/venv-cloud/bin/pip" -q wheel --no-deps -w "$work/dist" "$checkout" >/dev/null
wheel=$(ls "$work"/dist/pytest_hpcnet-*.whl)
echo "$wheel"

# an unrelated project: one test, no inventory anywhere
mkdir -p "$work/unrelated"
printf 'def test_unrelated():\n    assert 1 + 1 == 2\n' > "$work/unrelated/test_unrelated.py"
# an inventory whose key file is missing: exit 4, one line naming the key and the path
cat > "$work/bad.yaml" <<'YAML'
cluster: {name: bad, region: cn-lab}
ssh: {identity_file: /nonexistent/id_ed25519}
nodes:
  - {name: node01, host: 198.18.0.11}
YAML
# a site's own check, to run beside the shipped suites
mkdir -p "$work/site_checks"
cat > "$work/site_checks/test_site.py" <<'PY'
import pytest


@pytest.mark.static
@pytest.mark.check("site_uname", "Kernel answers")
def test_kernel_release(cluster, node, check):
    result = cluster.run(node, "uname -r", recorder=check)
    assert result.ok and result.stdout.strip(), f"{node.name}: uname -r failed"
PY

check_venv() {  # $1: venv (made if missing); $2: pip requirement
  local venv=$1 status=0 out
  step "install $2 into $(basename "$venv")"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" -q install "$2" >/dev/null
  if "$venv/bin/python" -c "import xdist" 2>/dev/null; then fail "pytest-xdist came with $2"; fi
  if "$venv/bin/python" -c "import hypothesis" 2>/dev/null; then fail "test extras came with $2"; fi

  step "an unrelated project's tests pass with the plugin installed"
  (cd "$work/unrelated" && "$venv/bin/pytest" -q -p no:cacheprovider) || fail "unrelated project"
  (cd "$work/unrelated" && "$venv/bin/pytest" -q -p no:cacheprovider -p no:xdist) \
    || fail "unrelated project with -p no:xdist"

  step "a bad inventory is exit 4 with one line"
  out=$(cd "$work/unrelated" && "$venv/bin/pytest" --hpcnet-inventory "$work/bad.yaml" 2>&1) || status=$?
  echo "$out"
  [ "$status" -eq 4 ] || fail "bad inventory gave exit $status, not 4"
  grep -q "ssh.identity_file: /nonexistent/id_ed25519: no such file" <<<"$out" || fail "message"
  if grep -q Traceback <<<"$out"; then fail "traceback on a user mistake"; fi
}

lab_run() {  # $1: venv; $2: "audit" (the lab's control plane in scope) or "no-sdk"; the
  # inventory copied into an empty folder, run there, as the README says
  local venv=$1 scope=$2 folder status=0 run
  folder="$work/acceptance-$(basename "$1")"
  step "pytest --hpcnet-inventory lab.yaml in a folder holding only the inventory ($(basename "$venv"))"
  mkdir -p "$folder" && cp "$work/lab.yaml" "$folder/lab.yaml"
  out=$(cd "$folder" && "$venv/bin/pytest" --hpcnet-inventory lab.yaml -p no:cacheprovider) \
    || status=$?
  tail -n 12 <<<"$out"
  run=$(ls -d "$folder"/reports/*/ 2>/dev/null | head -n 1)
  [ -n "$run" ] && [ -s "$run/certificate.html" ] || fail "no certificate under $folder/reports"
  [ "$status" -eq 0 ] || fail "the lab run exited $status"
  # the whole suite: a handover verdict, marked as lab evidence; with the SDK the audit runs
  # against the lab's own control plane, without it the lab inventory leaves it out, saying why
  grep -q "^verdict: LAB ACCEPTED$" <<<"$out" || fail "the lab run was not ACCEPTED"
  if [ "$scope" = audit ]; then
    if grep -q "not in scope: cloud_audit" <<<"$out"; then fail "cloud_audit left out"; fi
    grep -Eq '"check_id": ?"cloud_audit".*"verdict": ?"pass"' "$run/evidence.jsonl" \
      || fail "no passing cloud_audit record against the lab's control plane"
  else
    grep -q "^  not in scope: cloud_audit: the cloud SDK is not installed" <<<"$out" \
      || fail "no 'not in scope' line naming the missing SDK"
  fi
  grep -q "^LAB evidence (emulated tools), not a cluster handover$" <<<"$out" || fail "no lab mark"
  echo "certificate: ${run}certificate.html"
}

check_venv "$work/venv-cloud" "$wheel[cloud]"
check_venv "$work/venv" "$wheel"

exec 9>/run/hpcnet-lab.lock
flock 9  # one lab per host: wait for any lab test session
trap '"$work/venv/bin/hpcnet" lab down --state-dir "$work/lab-state" >/dev/null; rm -rf "$work"' EXIT
# each venv brings the lab up itself: with [cloud] the lab inventory names the lab's own
# ECS/VPC control plane; without the SDK it leaves the audit out of scope
"$work/venv-cloud/bin/hpcnet" lab up --nodes 4 --state-dir "$work/lab-state" \
  --inventory "$work/lab.yaml" >/dev/null
lab_run "$work/venv-cloud" audit
"$work/venv-cloud/bin/hpcnet" lab down --state-dir "$work/lab-state" >/dev/null
"$work/venv/bin/hpcnet" lab up --nodes 4 --state-dir "$work/lab-state" \
  --inventory "$work/lab.yaml" >/dev/null
lab_run "$work/venv" no-sdk

step "pytest-ansible beside the wheel: --inventory is pytest-ansible's, --hpcnet-inventory ours"
python3 -m venv "$work/venv-ansible"
"$work/venv-ansible/bin/pip" -q install "$wheel" pytest-ansible >/dev/null
(cd "$work/unrelated" && "$work/venv-ansible/bin/pytest" -q -p no:cacheprovider) \
  || fail "an unrelated project with pytest-ansible and the plugin installed"
status=0
out=$(cd "$work/unrelated" && "$work/venv-ansible/bin/pytest" -p no:cacheprovider -m static \
  --hpcnet-inventory "$work/lab.yaml" --hpcnet-reports-dir "$work/ansible-reports" 2>&1) \
  || status=$?
grep -E "^(checks|verdict): " <<<"$out" || true
[ "$status" -eq 0 ] && grep -q "^verdict: LAB PASSED (static checks passed" <<<"$out" \
  || fail "$(tail -n 30 <<<"$out")"
out=$(cd "$work/unrelated" && "$work/venv-ansible/bin/pytest" -p no:cacheprovider \
  --inventory "$work/lab.yaml" 2>&1) || true
grep -qx "hpcnet: --inventory $work/lab.yaml went to another plugin; type --hpcnet-inventory $work/lab.yaml" \
  <<<"$out" || fail "no line naming --hpcnet-inventory: $(tail -n 10 <<<"$out")"

step "a connection: local run on this host (no GPU, no eRDMA here): one line per check"
cat > "$work/local.yaml" <<'YAML'
cluster: {name: local, region: cn-lab}
nodes:
  - {name: controller, connection: local}
YAML
status=0
out=$(cd "$work/unrelated" && "$work/venv-ansible/bin/pytest" -p no:cacheprovider -m static \
  --tb=long --hpcnet-inventory "$work/local.yaml" --hpcnet-reports-dir "$work/local-reports" 2>&1) \
  || status=$?
grep -E "^(checks|verdict): |^=+ .* in [0-9.]+s" <<<"$out" || true
[ "$status" -le 1 ] || fail "the local run exited $status: $(tail -n 30 <<<"$out")"
if grep -Eq "Traceback|Verdict\(|object at 0x" <<<"$out"; then fail "a check printed a traceback"; fi
# pytest's last line counts what the plugin counts: failed and not measured apart
checks=$(grep -E "^checks: " <<<"$out")
last=$(grep -E "^=+ .* in [0-9.]+s" <<<"$out" | tail -n 1)
for what in failed "not measured"; do
  ours=$(grep -Eo "[0-9]+ $what" <<<"$checks" | head -n 1 | cut -d' ' -f1)
  theirs=$(grep -Eo "[0-9]+ $what" <<<"$last" | head -n 1 | cut -d' ' -f1)
  [ "${ours:-0}" = "${theirs:-0}" ] || fail "pytest says ${theirs:-0} $what, the plugin ${ours:-0}"
done

step "the README's site checks (suites/, copied to site_checks/) beside the shipped suites"
cp -r "$checkout/suites" "$work/site_checks/examples"
step "a site's own check beside the shipped suites (--pyargs pytest_hpcnet.suites site_checks/)"
status=0
out=$(cd "$work" && "$work/venv/bin/pytest" --hpcnet-inventory "$work/lab.yaml" -p no:cacheprovider \
  -m static --hpcnet-reports-dir "$work/site-reports" --pyargs pytest_hpcnet.suites site_checks/ 2>&1) \
  || status=$?
grep -E "^(checks|verdict): " <<<"$out" || true
# -m static is a partial run: PASSED, never a handover certificate
[ "$status" -eq 0 ] && grep -q "^verdict: LAB PASSED (static checks passed, not a handover certificate)" \
  <<<"$out" || fail "$(tail -n 30 <<<"$out")"
grep -Eq '"check_id": ?"site_uname"' "$work"/site-reports/*/evidence.jsonl || fail "no site evidence"
for example in site_kernel site_mounts; do  # the README's examples ran and were recorded
  grep -Eq "\"check_id\": ?\"$example" "$work"/site-reports/*/evidence.jsonl \
    || fail "the suites/ example $example left no evidence"
done
step "passed"
