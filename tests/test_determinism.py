"""Same model, kernel and target: the same bytes from two fresh processes with different
hash seeds. (Generating twice in one process proves nothing: the atoms, their hashes and
every set order are the same objects the second time.) The four-bar kinematics of every
target is compared across processes and installs by test_install.py, the four-bar
equations in c-double and c-float32 by test_render_c.py; these add the dynamics kernels
and the fixed-point and RTL targets of other kernels."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers.builds import generate_in_fresh_process

pytestmark = pytest.mark.slow  # two CLI processes per case
MBFORGE = Path(sys.executable).parent / "mbforge"

CASES = [
    ("slidercrank", "forward-dynamics", "c-double"),
    ("slidercrank", "inverse-dynamics", "c-float32"),
    ("fourbar", "equations", "c-fixed"),
    ("slidercrank", "inverse-dynamics", "c-fixed-m0"),
    ("fourbar", "equations", "verilog"),
]


@pytest.mark.parametrize("model, kernel, target", CASES)
def test_two_processes_with_other_hash_seeds_write_the_same_bytes(model, kernel, target, tmp_path):
    a = generate_in_fresh_process(model, kernel, target, tmp_path / "a", "1")
    b = generate_in_fresh_process(model, kernel, target, tmp_path / "b", "2")
    assert "manifest.json" in a and len(a) >= 2
    assert a == b, sorted(name for name in a if a[name] != b.get(name))
