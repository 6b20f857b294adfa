"""The acceptance suites, shipped with the plugin: `pytest --hpcnet-inventory x.yaml` runs them."""
