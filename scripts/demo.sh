#!/usr/bin/env bash
# The main job on the embedded lab: install, bring up a 4-node lab, run the acceptance suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/hpcnet lab up --nodes "${HPCNET_LAB_NODES:-4}"
status=0
.venv/bin/python -m pytest --hpcnet-inventory inventories/lab.yaml "$@" || status=$?
latest=$(ls -td reports/*/ 2>/dev/null | head -n 1)
echo "reports: ${latest:-reports/} (certificate.html, report.html, junit.xml, evidence.jsonl)"
exit $status
