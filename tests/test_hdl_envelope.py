"""`mbforge hdl` reads the model and kernel flags as `generate` does (mbforge.cli.add_model_flags,
model_kernel): a workspace narrowed with --envelope goes to the RTL, and a kernel pinned to
the example's driven motion says so."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.hdl, pytest.mark.slow]
MBFORGE = Path(sys.executable).parent / "mbforge"


def _run(*args):
    return subprocess.run([str(MBFORGE), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_narrowed_envelope_goes_to_the_rtl_as_generate_makes_it(tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"quantities": {"crank": {"range": [-0.5, 0.5], "cells": 8}}}))
    r = _run("hdl", "fourbar", "--kernel", "equations", "--variant", "shared", "--envelope", env,
             "--vectors", "20", "--no-synth", "--out", tmp_path / "h")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "note:" not in r.stdout
    m = json.loads((tmp_path / "h" / "rtl" / "manifest.json").read_text())
    assert m["envelope"]["source"] == "env.json"
    assert m["envelope"]["quantities"]["crank"]["range"] == [-0.5, 0.5]
    # yB = sin(crank) stays within +-0.48: the format of q[1] is narrowed from the full turn's +-1
    assert max(abs(v) for v in m["inputs"][0]["envelope"][1]) < 0.5
    # the same flags, the same kernel: hdl's host model is generate's c-fixed, byte for byte
    g = _run("generate", "fourbar", "--kernel", "equations", "--target", "c-fixed", "--envelope", env,
             "--out", tmp_path / "g")
    assert g.returncode == 0, g.stderr
    for f in (tmp_path / "g").iterdir():
        assert (tmp_path / "h" / "fixed" / f.name).read_bytes() == f.read_bytes(), f.name


def test_envelope_on_a_kernel_built_over_none_is_one_line(tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"quantities": {"crank": {"range": [-0.5, 0.5]}}}))
    for cmd in (("hdl", "--no-synth"), ("generate",)):
        r = _run(*cmd, "fourbar", "--kernel", "kinematics", "--envelope", env, "--out", tmp_path / cmd[0])
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert "--envelope" in lines[0] and "kinematics" in lines[0]
        assert not (tmp_path / cmd[0] / "rtl").exists()


def test_kernel_pinned_to_the_driven_motion_says_so(tmp_path):
    r = _run("hdl", "slidercrank_disc", "--set", "envelope=False", "--kernel", "inverse-dynamics", "--variant",
             "shared", "--vectors", "5", "--no-synth", "--out", tmp_path / "h")
    assert r.returncode == 0, r.stdout + r.stderr
    note = [l for l in r.stdout.splitlines() if l.startswith("note:")]
    assert len(note) == 1 and "driven motion" in note[0] and "status 2" in note[0], r.stdout
    m = json.loads((tmp_path / "h" / "rtl" / "manifest.json").read_text())
    assert m["envelope"] is None
