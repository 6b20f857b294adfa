#!/usr/bin/env bash
# The project's own tests: install, lint, then unit, conformance and lab tests.
set -euo pipefail
cd "$(dirname "$0")/.."
HPCNET_EXTRA_APT="chromium ${HPCNET_EXTRA_APT:-}" bash scripts/install.sh   # chromium: certificate test
.venv/bin/ruff check pytest_hpcnet tests benchmarks suites
.venv/bin/ruff format --check -q pytest_hpcnet tests benchmarks suites
.venv/bin/python -m pytest tests -p no:cacheprovider "$@"
