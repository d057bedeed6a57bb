"""The benchmarks still run (on the smallest model); their numbers are read, not asserted."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(*args):
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_engine_bench_runs():
    out = _run("bench.engine", "--models", "fourbar", "--repeat", "1", "--no-sympy", "--chain", "4,8")
    assert "casadi" in out and "ops ratio" in out


def test_host_bench_runs():
    out = _run("bench.host", "--models", "fourbar", "--no-sympy", "--repeat", "1")
    assert "ns/call" in out and "casadi" in out


def test_arms_bench_scaling_runs():
    out = _run("bench.arms", "--no-arm", "--chain", "3,6", "--mq", "")
    assert "forward-dynamics-aba: operations grow as N^" in out


@pytest.mark.firmware
def test_device_bench_runs():
    out = _run("bench.device", "--models", "fourbar")
    assert "instr/call" in out and "casadi" in out
