"""What a run leaves behind: check records and evidence, the run's verdict, the certificate
(rows, formatting, heatmap, template), signing and verification, merge, metrics, baselines.

Only this layer writes result files and renders HTML.
"""
