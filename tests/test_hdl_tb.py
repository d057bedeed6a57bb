"""The plain Verilog testbench `mbforge hdl` writes into rtl/ (mbforge.hdl.tb): rtl/<top>_tb.v
and its vector files, run with nothing but iverilog or Verilator, PASS on the kernel and
FAIL (a non-zero exit) on a wrong expected word, a stalled kernel or a short file."""
import argparse
import os
import subprocess

import pytest

from mbforge.hdl import cli
from mbforge.hdl import sim as S
from mbforge.hdl.tb import run_tb, tb_commands

pytestmark = [pytest.mark.hdl, pytest.mark.slow]
TOP = "fourbar_kinematics_hw"
FILES = (f"{TOP}_tb.v", f"{TOP}_in.hex", f"{TOP}_expected.hex")


def _hdl(out, variant):
    ap = argparse.ArgumentParser(prog="mbforge")
    cli.register(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(["hdl", "fourbar", "--kernel", "kinematics", "--variant", variant, "--vectors", "20",
                          "--no-synth", "--out", str(out)])
    assert args.func(args) == 0
    return out / "rtl"


@pytest.fixture(scope="module", params=["pipelined", "shared"])
def rtl(request, tmp_path_factory):
    return _hdl(tmp_path_factory.mktemp(request.param), request.param)


def _rerun(rtl, sim):
    """The built bench once more on rtl/'s hex files, as they are now."""
    work = rtl / f"tb_{sim}"
    for name in FILES[1:]:
        (work / "rtl" / name).write_bytes((rtl / name).read_bytes())
    p = subprocess.run(tb_commands(TOP, sim, [])[-1], cwd=work, env=dict(os.environ) | S.sim_env(sim),
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


# Verilator on one variant: its --binary build is the slow part, and the bench is the same file
@pytest.mark.parametrize("rtl, sim", [("pipelined", "icarus"), ("shared", "icarus"), ("pipelined", "verilator")],
                         indirect=["rtl"])
def test_plain_bench_passes_then_fails_on_one_flipped_expected_word(rtl, sim):
    n = len((rtl / f"{TOP}_in.hex").read_text().split()) // 5  # the four-bar's kinematics: 5 inputs
    r = run_tb(rtl, sim)
    assert r.passed and r.verdict == f"PASS {n} vectors", r.text[-3000:]
    exp = rtl / f"{TOP}_expected.hex"
    good = exp.read_text()
    words = good.split()
    words[14] = f"{int(words[14], 16) ^ 1:08x}"  # vector 1 (13 words each), out_1: one bit
    exp.write_text("".join(w + "\n" for w in words))
    try:
        rc, text = _rerun(rtl, sim)
    finally:
        exp.write_text(good)
    assert rc != 0 and f"FAIL 1 of {n} vectors" in text.splitlines(), text[-3000:]
    assert "MISMATCH vector 1 out_1:" in text, text[-3000:]


@pytest.mark.parametrize("rtl", ["pipelined"], indirect=True)  # the files' writer is the same for both
def test_plain_bench_files_are_deterministic(rtl, tmp_path):
    again = _hdl(tmp_path / "again", "pipelined")
    for name in FILES:
        assert (again / name).read_bytes() == (rtl / name).read_bytes(), name


@pytest.mark.parametrize("rtl", ["pipelined"], indirect=True)  # one variant is enough
def test_plain_bench_ends_on_a_stalled_kernel_and_a_short_file(rtl):
    """The timeout guard (ap_done never rises) and a file whose length is not whole vectors."""
    kernel = rtl / f"{TOP}.v"
    good = kernel.read_text()
    assert good.count("assign ap_done = ") == 1
    kernel.write_text(good.replace("assign ap_done = ", "assign ap_done = 1'b0 && "))
    try:
        r = run_tb(rtl, "icarus")
    finally:
        kernel.write_text(good)
    assert r.returncode != 0 and r.verdict.startswith("FAIL timeout: 0 of "), r.text[-2000:]
    inp = rtl / f"{TOP}_in.hex"
    good = inp.read_text()
    inp.write_text(good + "00000001\n")
    try:
        r = run_tb(rtl, "icarus")
    finally:
        inp.write_text(good)
    assert r.returncode != 0 and "not a whole number of vectors of 5 words" in r.verdict, r.text[-2000:]
