"""A pytest plugin for the benchmarks: each process of a run (the controller and every xdist
worker) leaves its own CPU time and peak RSS in `$HPCNET_RUSAGE_DIR/<process>.json`.

    HPCNET_RUSAGE_DIR=/tmp/ru python -m pytest -p benchmarks.xdist_rusage -n 2 ...
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    folder = os.environ.get("HPCNET_RUSAGE_DIR")
    if not folder:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    name = getattr(config, "workerinput", {}).get("workerid", "controller")
    record = {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}
    Path(folder, f"{name}.json").write_text(json.dumps(record))
