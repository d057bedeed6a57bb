"""Helpers shared by the test modules (no tests here). pytest puts tests/ on sys.path (the
folder has no __init__.py), so a test imports them as `from helpers.models import ...`;
no test module imports another, and none edits sys.path.

    (here)       ROOT, FIXTURES, TOY: the checkout, tests/fixtures, the toy kernel
    tools        require(): a tool the bootstrap installs, missing: skip, or fail under CI
    packaging    the package's folders and modules as pyproject.toml maps them
    models       small models (cart-pole, double pendulum, sled and trailer), the heading
                 fixture's consistent states, a kernel's inputs from named states, whether
                 a cover's boxes hold given states, recursive kernels against M(q)
    builds       C built and run on the host (the float32 sin/cos), a generated
                 firmware project's flags, `mbforge generate` in a fresh process
    hdl_kernels  small kernels of the HDL tests
    faultproxy   a TCP proxy that damages the HIL link's byte stream
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TOY = FIXTURES / "toy"
