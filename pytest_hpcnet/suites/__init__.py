"""The acceptance suites, shipped with the plugin: `pytest --inventory x.yaml` runs them."""
