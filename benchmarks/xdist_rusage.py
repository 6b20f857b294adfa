"""A pytest plugin for the benchmarks: each process of a run (the controller and every xdist
worker) leaves its own CPU time and peak RSS in `$HPCNET_RUSAGE_DIR/<process>.json`, and,
with `$HPCNET_PROFILE_DIR`, its cProfile from configure to unconfigure in
`<process>.prof`.

    HPCNET_RUSAGE_DIR=/tmp/ru python -m pytest -p benchmarks.xdist_rusage -n 2 ...
"""

from __future__ import annotations

import cProfile
import json
import os
import resource
from pathlib import Path

import pytest

PROFILE = pytest.StashKey[cProfile.Profile]()


def _name(config: pytest.Config) -> str:
    return getattr(config, "workerinput", {}).get("workerid", "controller")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("HPCNET_PROFILE_DIR"):
        profile = cProfile.Profile()
        config.stash[PROFILE] = profile
        profile.enable()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    profile = config.stash.get(PROFILE, None)
    if profile is not None:
        profile.disable()
        profile.dump_stats(Path(os.environ["HPCNET_PROFILE_DIR"], f"{_name(config)}.prof"))
    folder = os.environ.get("HPCNET_RUSAGE_DIR")
    if not folder:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}
    Path(folder, f"{_name(config)}.json").write_text(json.dumps(record))
