"""Alibaba Cloud control-plane audit: security groups and network ACLs (docs/cloud-audit.md).

`rules` holds the shared terms (protocol, policy, direction, port range, CIDR) and the
`Flow` being judged; `secgroup_model` and `nacl_model` parse the API's JSON shapes into
typed security groups and network ACLs, `interfaces` the ENIs and ERIs. `secgroup`
evaluates the stateful security groups for a flow and `nacl` the stateless network ACLs.
`readers` calls the SDK, `audit` gathers a `plane.ControlPlane` once per session,
`verdicts` judges it per interface pair and port range, and `flows` holds the required
and external flows of the inventory. The lab serves its own stand-in for the API
(`lab/cloud_api.py`, `lab/control_plane.py`).
"""

from __future__ import annotations
