"""The handover certificate: its page, rows, header, GPU tables and formats."""
