"""Programs the plugin sends to nodes as text and runs there (never imported by the plugin)."""
