"""Alibaba Cloud control-plane audit: security groups and network ACLs.

`rules` parses the API's JSON shapes into typed models, `secgroup` evaluates
the stateful security groups for a flow and `nacl` the stateless network ACLs.
"""

from __future__ import annotations
