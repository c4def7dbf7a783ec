"""Starts `structgen serve` processes for the tests (SmolLM2-135M, named explicitly)."""
import os
import re
import signal
import subprocess
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("STRUCTGEN_BIN", os.path.join(ROOT, "target", "release", "structgen"))
MODEL = os.environ.get("STRUCTGEN_SERVE_MODEL", "smollm2-135m")


class Server:
    """One `structgen serve` process on a free port."""

    def __init__(self, *args):
        cmd = [BIN, "serve", "--model", MODEL, "--port", "0", "--threads", "2", *args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        self.log = []
        deadline = time.time() + 300
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("structgen serve exited:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"on (http://[\d.]+:\d+)/v1", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("structgen serve did not start:\n" + "".join(self.log))

    @property
    def base(self):
        return self.url + "/v1"

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rest = self.proc.communicate(timeout=timeout)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest = self.proc.communicate()[1]
        self.log.append(rest or "")
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    s = Server("--parallel", "8", "--max-queue", "256")
    yield s
    s.stop()


@pytest.fixture
def spawn():
    started = []

    def start(*args):
        s = Server(*args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop(signal.SIGKILL)
