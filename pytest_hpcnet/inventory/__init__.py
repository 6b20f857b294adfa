"""The cluster inventory: models and their loader, profiles and expectations, node sources.

The lowest layer: it imports nothing of the package but `pytest_hpcnet.redact`.
"""
