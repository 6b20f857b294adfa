"""pytest_hpcnet: acceptance tests for GPU clusters (eRDMA, CPFS) as a pytest plugin."""

__version__ = "0.1.0"
