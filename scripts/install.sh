#!/usr/bin/env bash
# Install what pytest_hpcnet and its lab need on Debian/Ubuntu (run as root):
# Debian packages for the lab and the tools it runs, then a venv in .venv with the project.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3 python3-venv python3-pip openssh-server openssh-client iproute2 iptables
          iputils-ping procps curl fio openmpi-bin slurmctld slurmd slurm-client munge ${HPCNET_EXTRA_APT:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test]"
