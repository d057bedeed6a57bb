"""A step kernel in the FPGA flow (issue 27, item 5): `mbforge hdl MODEL --kernel step` runs
a motion in the RTL (cocotb, each step's state fed back as the next step's input) and
compares it bit for bit with the c-fixed host model's run, and with the c-double step.
The models: the one-link chain (rk4 on a pendulum in relative coordinates), the double
pendulum's Euler step, and a closed loop, the four-bar over its operating envelope (rk4
with exact multipliers): the step kernels the fixed-point range analysis admits today (docs/kernels.md,
step)."""
import subprocess

import pytest

from helpers.builds import MBFORGE
from mbforge.hdl import sim as S
from mbforge.manifest import Manifest

pytestmark = pytest.mark.hdl


def _hdl_step(out, n: int, *options):
    """`mbforge hdl chain --set n=N --kernel step` (shared, 1 multiplier) with a 0.3 s horizon."""
    return subprocess.run([str(MBFORGE), "hdl", "chain", "--set", f"n={n}", "--kernel", "step", "--dt", "1e-3",
                           *options, "--variant", "shared", "--multipliers", "1", "--vectors", "20", "--no-synth",
                           "--horizon", "0.3", "--out", str(out)], capture_output=True, text=True, timeout=900)


def _assert_horizon_bit_exact(r, latency: int, q_max: float) -> None:
    """300 steps fed back bit-exact with the c-fixed host model, at `latency` cycles per
    step, and the RTL's q within (1e-9, q_max) of the double step's."""
    assert r.returncode == 0, r.stdout + r.stderr
    assert "horizon: 300 steps of 0.001 s fed back in the RTL: bit-exact with the c-fixed host model's run: True" \
        in r.stdout
    assert f"latency {latency} cycles per step" in r.stdout
    line = next(x for x in r.stdout.splitlines() if "max |rtl - double step|" in x)
    q = float(line.split(": q ")[1].split(",")[0])
    assert 1e-9 < q < q_max, line


@pytest.fixture(scope="module")
def chain_hdl(tmp_path_factory):
    out = tmp_path_factory.mktemp("hdlstep") / "chain"
    return out, _hdl_step(out, 1)


@pytest.mark.slow
def test_hdl_runs_the_step_over_a_horizon_bit_exact(chain_hdl):
    # measured 1.9e-7 rad over 0.3 s; one step's bound is 6e-8 (latency 152 from the Lagrangian forms)
    _assert_horizon_bit_exact(chain_hdl[1], 102, 1e-5)


@pytest.mark.slow
def test_horizon_tells_another_kernels_motion_apart(chain_hdl, tmp_path):
    """The comparison can fail: the same RTL against the host model of the step at 2 ms
    (one more step's worth of motion per step) is not bit-exact; against its own it is."""
    out, _ = chain_hdl
    other = tmp_path / "dt2"
    r = subprocess.run([str(MBFORGE), "generate", "chain", "--set", "n=1", "--kernel", "step", "--dt", "2e-3",
                        "--target", "c-fixed", "--out", str(other)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    b = S.build(out / "rtl", "icarus")
    x = Manifest.load(out / "rtl").step_start(0.0, [0.3, 0.0])
    own = S.horizon(b, out / "fixed", out / "double", x, 50, 5)
    assert own.passed and own.latency == 102 and own.first_difference is None
    wrong = S.horizon(b, other, out / "double", x, 50, 5)
    assert not wrong.bit_exact and not wrong.passed and wrong.first_difference == 0


def test_horizon_flag_belongs_to_step_kernels(tmp_path):
    r = subprocess.run([str(MBFORGE), "hdl", "chain", "--set", "n=1", "--horizon", "1", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and r.stderr.strip() == \
        "mbforge hdl: error: --horizon goes with --kernel step, not --kernel equations"
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_hdl_runs_the_double_pendulum_euler_step_bit_exact(tmp_path):
    """chain n=2 (semi-implicit Euler; M by CRBA, pivots floored by the links' inertias) in
    the RTL over 0.3 s, each step's state fed back: bit-exact with the c-fixed host model's
    run (measured: latency 98 cycles, 2.9e-7 rad from the double step; 123 cycles and 4.4e-7
    rad from the Lagrangian forms)."""
    _assert_horizon_bit_exact(_hdl_step(tmp_path / "chain2", 2, "--integrator", "euler"), 98, 1e-4)


@pytest.mark.slow
def test_hdl_runs_the_four_bars_step_bit_exact(tmp_path):
    """A closed loop in the RTL: the four-bar (nfourbar n=1: crank, coupler, crank; 4
    coordinates, 3 constraints) swinging 0.5 rad about hanging, rk4 with exact multipliers
    (--penalty 0) over its envelope's near-consistent states; 769 operators, shared with one
    multiplier: 50 steps of 10 ms fed back bit-exact with the c-fixed host model, and within
    1e-7 m of the double step (measured 6.6e-9 m over 1 s; one step's bound 6.1e-9 m). The
    pendulum in natural coordinates goes the same way (docs/kernels.md)."""
    r = subprocess.run([str(MBFORGE), "hdl", "nfourbar", "--set", "n=1", "--set", "swing=0.5", "--kernel", "step",
                        "--integrator", "rk4", "--penalty", "0", "--dt", "0.01", "--variant", "shared",
                        "--multipliers", "1", "--vectors", "5", "--no-synth", "--horizon", "0.5",
                        "--out", str(tmp_path / "p")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "horizon: 50 steps of 0.01 s fed back in the RTL: bit-exact with the c-fixed host model's run: True" \
        in r.stdout
    assert "latency 584 cycles per step" in r.stdout
    line = next(x for x in r.stdout.splitlines() if "max |rtl - double step|" in x)
    q = float(line.split(": q ")[1].split(",")[0])
    assert 1e-10 < q < 1e-7, line


@pytest.mark.slow
def test_hdl_runs_the_four_bars_full_turns_through_its_singular_positions(tmp_path):
    """The four-bar turning fully (nfourbar n=1 --set envelope=True: the coupler in closed
    form, the crank's full turn declared), rk4 --penalty 0 over its independent coordinates
    (--reduced: the crank's tip under one distance equation, model.reduce): 2 s of 10 ms
    steps, through the singular positions, fed back in the RTL bit-exact with the c-fixed
    host model and within 1e-6 m of the double step (measured 7.7e-8 m; one step's bound
    4.5e-9 m); 189 cycles a step on one shared multiplier."""
    r = subprocess.run([str(MBFORGE), "hdl", "nfourbar", "--set", "n=1", "--set", "envelope=True", "--kernel", "step",
                        "--integrator", "rk4", "--penalty", "0", "--reduced", "--dt", "0.01", "--variant", "shared",
                        "--multipliers", "1", "--vectors", "5", "--no-synth", "--horizon", "2",
                        "--out", str(tmp_path / "p")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "horizon: 200 steps of 0.01 s fed back in the RTL: bit-exact with the c-fixed host model's run: True" \
        in r.stdout
    line = next(x for x in r.stdout.splitlines() if "max |rtl - double step|" in x)
    q = float(line.split(": q ")[1].split(",")[0])
    assert 1e-10 < q < 1e-6, line
