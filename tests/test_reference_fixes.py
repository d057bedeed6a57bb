"""Reference-solver fixes of issue 12: the redundancy check of a position solved with fixed
coordinates (holonomic rows only, no lasting effect), the energy balance of runs that do
work on the system, and the output grid of forward dynamics."""
import math
import warnings

import numpy as np
import pytest

from mbforge.examples.fourbar import build as fourbar
from mbforge.ir import sin
from mbforge.model import Model
from mbforge.reference import Dynamics, Kinematics, RedundantConstraintsWarning

from helpers.models import sled_with_trailer

G = 9.81


# ---- (a) the redundancy check of position(fixed=...) -----------------------------------------
def test_velocity_constraints_do_not_make_a_fixed_position_redundant():
    kin = Dynamics(sled_with_trailer("ra").equations())
    q0 = [0.0, 0.0, 0.1, -0.5, 0.0, -0.2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedundantConstraintsWarning)  # before the fix: 2 redundant (the blades)
        q = kin.position(0.0, q0, fixed=["ra_sx", "ra_sy", "ra_sth", "ra_tth"])
        assert np.max(np.abs(kin.residual(0.0, q))) < 1e-14
        kin.position(0.0, q0)
    assert kin.redundant == []  # the model's own finding, not spoilt by the fixed call
    # the hitch closes: trailer reference point 0.5 behind the sled
    assert q[3] == pytest.approx(-0.5 * math.cos(0.1), abs=1e-14)


def test_a_redundant_fixed_position_warns_once_and_does_not_stick():
    m = fourbar(driven=False)
    kin = Kinematics(m.equations())
    q0 = [1.0, 0.0, 3.0, 2.5]
    # both crank-pin coordinates fixed: bar_AB has no free coordinate left
    with pytest.warns(RedundantConstraintsWarning, match=r"with xB, yB fixed: bar_AB"):
        kin.position(0.0, q0, fixed=["xB", "yB"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedundantConstraintsWarning)
        kin.position(0.0, q0, fixed=["xB", "yB"])  # once per set of fixed coordinates
        kin.position(0.0, q0)
    assert kin.redundant == []
    assert kin._fixed_redundant == {(0, 1): ["bar_AB"]}


# ---- (b) the energy report is a balance --------------------------------------------------------
def _torqued_pendulum(prefix: str, damping: float = 0.0) -> Model:
    """A bar pivoted at the origin (relative coordinates), a torque actuator at the pivot and
    an optional viscous damper on the angle."""
    m = Model(f"{prefix}_tp")
    th = m.coordinate(f"{prefix}_th", guess=-math.pi / 2, range=(-9, 9), vrange=(-20, 20), arange=(-99, 99))
    tree = m.relative()
    b = tree.base("bar_axes", tree.world, (0.0, 0.0, 1.0), th)
    tree.body("bar", b, tree.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 1 / 12, 1 / 12))
    m.gravity((0.0, -G, 0.0))
    m.actuator("motor", th)
    if damping:
        m.spring_damper("damper", th, k=0.0, c=damping)
    return m


def test_energy_balance_of_a_motor_driven_pendulum():
    d = Dynamics(_torqued_pendulum("eb").equations())
    tau = 2.0
    tr = d.forward(2.0, u=[tau], dt=0.05)
    assert tr.balance
    dE = tr.E - tr.E[0]
    assert np.max(np.abs(dE)) > 1.0  # the motor does work: the plain drift is no error measure
    # the work of a constant torque is tau times the angle turned
    np.testing.assert_allclose(tr.W, tau * (tr.Q[:, 0] - tr.Q[0, 0]), atol=1e-9)
    assert tr.drift < 1e-9
    assert tr.energy_report().startswith("energy balance residual")


def test_energy_balance_of_a_damper_and_a_feedback_torque():
    d = Dynamics(_torqued_pendulum("ed", damping=0.4).equations())
    tr = d.forward(1.5, qd0=[3.0], u=lambda t, q, qd: [-0.5 * q[0]], dt=0.1)
    assert tr.balance and np.max(np.abs(tr.E - tr.E[0])) > 0.5
    assert tr.drift < 1e-9


def test_energy_balance_with_a_driver():
    """A pendulum hung from a block driven along x: the driver's force does the work."""
    m = Model("edrv")
    xb = m.coordinate("edrv_x", range=(-1, 1), vrange=(-2, 2), arange=(-9, 9))
    th = m.coordinate("edrv_th", guess=-1.2, range=(-9, 9), vrange=(-20, 20), arange=(-99, 99))
    tree = m.relative()
    slider = tree.point("slider", tree.origin, [xb, 0.0, 0.0], tree.world)
    tree.body("block", tree.world, slider).set_inertia(2.0)
    b = tree.base("bar_axes", tree.world, (0.0, 0.0, 1.0), th)
    tree.body("bar", b, slider).set_inertia(1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 1 / 12, 1 / 12))
    m.gravity((0.0, -G, 0.0))
    m.drive(xb - 0.3 * sin(2.0 * m.t), "shake")
    d = Dynamics(m.equations())
    tr = d.forward(2.0, dt=0.05)
    assert tr.balance and np.max(np.abs(tr.E - tr.E[0])) > 0.1
    assert tr.drift < 1e-8


def test_conservative_runs_keep_the_plain_drift():
    d = Dynamics(_torqued_pendulum("ec").equations())
    tr = d.forward(1.0, dt=0.05)  # no torque given: nothing does work
    assert not tr.balance and tr.W is None
    assert tr.drift_abs == pytest.approx(float(np.max(np.abs(tr.E - tr.E[0]))), abs=0.0)
    assert tr.drift < 1e-9
    assert tr.energy_report().startswith("energy drift")


def test_simulate_reports_the_balance(tmp_path):
    from mbforge.simulate.cli import simulate

    m = Model("esim")
    xb = m.coordinate("esim_x", range=(-1, 1), vrange=(-2, 2), arange=(-9, 9))
    th = m.coordinate("esim_th", guess=-1.2, range=(-9, 9), vrange=(-20, 20), arange=(-99, 99))
    tree = m.relative()
    slider = tree.point("slider", tree.origin, [xb, 0.0, 0.0], tree.world)
    b = tree.base("bar_axes", tree.world, (0.0, 0.0, 1.0), th)
    tree.body("bar", b, slider).set_inertia(1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 1 / 12, 1 / 12))
    m.gravity((0.0, -G, 0.0))
    m.drive(xb - 0.3 * sin(2.0 * m.t), "shake")
    m.time_range(0.0, 1.0)
    r = simulate(m, tmp_path, points=21)
    assert "energy balance residual" in r["summary"] and "energy drift" not in r["summary"]
    res = float(r["summary"].split("energy balance residual ")[1].split()[0])
    assert res < 1e-8


# ---- (c) forward returns every point of its dt grid ----------------------------------------------
@pytest.mark.parametrize("t_end, dt, expect", [
    (0.03, 0.02, [0.0, 0.02, 0.03]),
    (0.03, 0.007, [0.0, 0.007, 0.014, 0.021, 0.028, 0.03]),
    (0.06, 0.02, [0.0, 0.02, 0.04, 0.06]),  # t_end on the grid (within rounding): not twice
    (0.1, 0.1, [0.0, 0.1]),
])
def test_forward_output_grid(t_end, dt, expect):
    d = Dynamics(_torqued_pendulum(f"fg{int(dt * 1000)}_{int(t_end * 100)}").equations())
    tr = d.forward(t_end, dt=dt)
    np.testing.assert_allclose(tr.t, expect, rtol=0, atol=1e-15)
    assert tr.t[-1] == t_end
    assert tr.Q.shape == (len(expect), 1)


def test_forward_rejects_a_bad_grid():
    from mbforge.reference import DynamicsError

    d = Dynamics(_torqued_pendulum("fbad").equations())
    with pytest.raises(DynamicsError, match="dt must be positive"):
        d.forward(1.0, dt=0.0)
    with pytest.raises(DynamicsError, match="before the start time"):
        d.forward(-1.0)
