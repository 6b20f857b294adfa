"""The test suite's own helpers where a mistake would make tests pass or fail by luck."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.conftest import popen_interruptible

SHOW = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def test_sigint_reaches_the_child_even_when_ignored_here():
    """The SIGINT tests failed in CI only: there the test process inherited SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True)
        child = popen_interruptible([sys.executable, "-c", SHOW], stdout=subprocess.PIPE, text=True)
        out, _ = child.communicate(timeout=30)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert plain.stdout.strip() == "False"  # what a plain Popen would have given
    assert out.strip() == "True"
