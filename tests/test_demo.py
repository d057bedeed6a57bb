"""The README's demo, end to end: generate, real `pio run`, real QEMU, real serial socket."""
import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.firmware, pytest.mark.slow]


def test_demo_passes_and_reports(tmp_path):
    out = tmp_path / "demo.json"
    r = subprocess.run([sys.executable, "-m", "mbforge.cli", "demo", "--json", str(out), "--vectors", "1000"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["passed"] is True
    assert rep["vectors"] >= 1000
    assert set(rep["outputs"]) == {"Phi", "Phi_q", "Phi_t", "gamma"}
    for name, g in rep["outputs"].items():
        assert g["passed"], name
        if name != "Phi":  # Phi ~ 1e-7 on the consistent states drawn: judged by its bound
            assert g["max_rel_error"] <= 1e-5, name
    assert rep["host_model"]["vectors_mismatched"] == 0
    w = rep["work_per_call"]
    assert w["unit"] == "instructions" and 50 < w["min"] <= w["max"] < 2000
    assert "PASS" in r.stdout
