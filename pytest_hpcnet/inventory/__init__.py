"""The cluster inventory: models, profiles and expectations, node sources (Ansible, Terraform).

The lowest layer: it imports nothing of the package but `pytest_hpcnet.redact`.
"""
