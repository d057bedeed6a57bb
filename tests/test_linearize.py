"""mbforge.linearize: A, B (C, D) of the forward dynamics about a consistent operating point,
against closed forms (cart-pole) and against central differences of the double reference
(Dynamics.position / velocity with fixed coordinates, then Dynamics.accelerations)."""
import math

import numpy as np
import pytest

import mbforge
from mbforge.examples.fourbar import build as fourbar
from mbforge.ir import sin
from mbforge.reference import Dynamics

from helpers.models import L_COM, cart_pole, cart_pole_closed_form, double_pendulum, sled_with_trailer


@pytest.mark.parametrize("upright", [True, False])
def test_cart_pole_closed_form(upright):
    pre = "cpu" if upright else "cpd"
    m = cart_pole(pre)
    th = math.pi / 2 if upright else -math.pi / 2
    lin = mbforge.linearize(m, q={f"{pre}_xc": 0.0, f"{pre}_thp": th}, u=[0.0],
                            coordinates=[f"{pre}_xc", f"{pre}_thp"])
    assert lin.state == [f"{pre}_xc", f"{pre}_thp", f"{pre}_xc_d", f"{pre}_thp_d"]
    assert lin.inputs == ["push"] and lin.is_equilibrium
    A, B = cart_pole_closed_form(upright)
    np.testing.assert_allclose(lin.A, A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lin.B, B, rtol=0, atol=1e-12)
    # the tip's x: x + 2 l cos(thp); d/dthp = -2 l sin(thp)
    np.testing.assert_allclose(lin.C, [[1.0, -2 * L_COM * math.sin(th), 0.0, 0.0]], atol=1e-12)
    np.testing.assert_array_equal(lin.D, [[0.0]])


def test_cart_pole_chooses_its_own_coordinates():
    """Left to itself the choice may differ (x_p instead of x_c): the eigenvalues may not."""
    m = cart_pole("cpa")
    lin = mbforge.linearize(m, q={"cpa_xc": 0.0, "cpa_thp": math.pi / 2})
    assert len(lin.coordinates) == 2 and len(lin.velocities) == 2
    A, _ = cart_pole_closed_form(True)
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(lin.A).real), np.sort(np.linalg.eigvals(A).real),
                               atol=1e-9)


# ---- central differences of the double reference in the same independent coordinates -------
def reduced_rhs(d: Dynamics, lin, z, w, u):
    """(dz/dt, dw/dt) at the consistent state with the independent coordinates at z and the
    independent velocities at w, solved by the reference (Newton from the operating point)."""
    names = d.names
    iz = [names.index(c) for c in lin.coordinates]
    iw = [names.index(v[:-2]) for v in lin.velocities]
    q = d.position(lin.t, lin.q, fixed={names[j]: z[k] for k, j in enumerate(iz)})
    qd = d.velocity(lin.t, q, fixed={names[j]: w[k] for k, j in enumerate(iw)})
    qdd, _ = d.accelerations(lin.t, q, qd, u)
    return np.concatenate([qd[iz], qdd[iw]])


def finite_differences(d: Dynamics, lin, h: float = 1e-5):
    names = d.names
    z0 = lin.q[[names.index(c) for c in lin.coordinates]]
    w0 = lin.qd[[names.index(v[:-2]) for v in lin.velocities]]
    x0 = np.concatenate([z0, w0])
    nz = len(z0)
    f0 = reduced_rhs(d, lin, z0, w0, lin.u)
    np.testing.assert_allclose(f0, lin.xdot, atol=1e-12)
    A = np.zeros((len(x0), len(x0)))
    for k in range(len(x0)):
        e = np.zeros(len(x0))
        e[k] = h
        fp = reduced_rhs(d, lin, (x0 + e)[:nz], (x0 + e)[nz:], lin.u)
        fm = reduced_rhs(d, lin, (x0 - e)[:nz], (x0 - e)[nz:], lin.u)
        A[:, k] = (fp - fm) / (2 * h)
    B = np.zeros((len(x0), len(lin.u)))
    for k in range(len(lin.u)):
        e = np.zeros(len(lin.u))
        e[k] = h
        B[:, k] = (reduced_rhs(d, lin, z0, w0, lin.u + e) - reduced_rhs(d, lin, z0, w0, lin.u - e)) / (2 * h)
    return A, B


def test_double_pendulum_against_finite_differences():
    m = double_pendulum()
    d = Dynamics(m.equations())
    lin = mbforge.linearize(m, q={"dpl_a": -1.0, "dpl_b": 0.7}, qd={"dpl_a": 1.3, "dpl_b": -0.8}, u=[0.5, -0.2])
    assert lin.state == ["dpl_a", "dpl_b", "dpl_a_d", "dpl_b_d"] and not lin.is_equilibrium
    A, B = finite_differences(d, lin)
    np.testing.assert_allclose(lin.A, A, rtol=0, atol=1e-8)
    np.testing.assert_allclose(lin.B, B, rtol=0, atol=1e-8)
    # the unconstrained structure: dz/dt = w exactly
    np.testing.assert_array_equal(lin.A[:2], [[0, 0, 1, 0], [0, 0, 0, 1]])
    # the output hand_y = sin(a) + 0.8 sin(a + b)
    a, b = -1.0, 0.7
    np.testing.assert_allclose(lin.C, [[math.cos(a) + 0.8 * math.cos(a + b), 0.8 * math.cos(a + b), 0, 0]],
                               atol=1e-12)


def test_closed_loop_fourbar_against_finite_differences():
    m = fourbar(driven=False)
    d = Dynamics(m.equations())
    lin = mbforge.linearize(m, q={"xB": 0.6}, qd={"xB": -0.9}, u=[1.5], coordinates=["xB"])
    assert lin.state == ["xB", "xB_d"] and lin.inputs == ["crank_torque"]
    A, B = finite_differences(d, lin, h=1e-6)
    np.testing.assert_allclose(lin.A, A, rtol=0, atol=1e-7)
    np.testing.assert_allclose(lin.B, B, rtol=0, atol=1e-7)
    assert np.max(np.abs(lin.B)) > 0.1 and np.max(np.abs(lin.A[1])) > 0.1


def test_non_holonomic_against_finite_differences():
    """A sled towing a trailer: 4 independent positions, 2 independent velocities."""
    m = sled_with_trailer("lnh")
    d = Dynamics(m.equations())
    lin = mbforge.linearize(m, q={"lnh_sx": 0.2, "lnh_sy": -0.1, "lnh_sth": 0.3, "lnh_tth": -0.4},
                            qd={"lnh_sx": 0.8, "lnh_sth": 0.5}, u=[0.3, -0.1],
                            coordinates=["lnh_sx", "lnh_sy", "lnh_sth", "lnh_tth"])
    assert len(lin.coordinates) == 4 and len(lin.velocities) == 2
    A, B = finite_differences(d, lin)
    np.testing.assert_allclose(lin.A, A, rtol=0, atol=1e-8)
    np.testing.assert_allclose(lin.B, B, rtol=0, atol=1e-8)
    assert np.max(np.abs(lin.A[:4, :4])) > 0.1  # the rates of the positions depend on the positions


def test_bad_choices_are_named():
    m = fourbar(driven=False)
    with pytest.raises(mbforge.LinearizationError, match="the model has 1 here, 2 given"):
        mbforge.linearize(m, q={"xB": 0.6}, coordinates=["xB", "yB"])
    with pytest.raises(mbforge.LinearizationError, match="no coordinate called 'zz'"):
        mbforge.linearize(m, q={"xB": 0.6}, coordinates=["zz"])
    with pytest.raises(mbforge.LinearizationError, match="no actuator called 'motor'"):
        mbforge.linearize(m, q={"xB": 0.6}, u={"motor": 1.0})


def test_spatial_closed_loops_with_the_drivers_left_out():
    """The Stewart platform in relative coordinates (24 coordinates, 3-D loops): its drivers
    are left out (the six leg forces take their place): 6 independent coordinates."""
    from mbforge.examples import load
    from mbforge.reference.linearize import Linearizer

    L = Linearizer(load("stewart_relative"))
    assert L.drivers == "drop"
    lin = L.at(u=[300.0, 310.0, 290.0, 305.0, 295.0, 300.0])
    assert lin.A.shape == (12, 12) and lin.B.shape == (12, 6)
    A, B = finite_differences(L.dyn, lin, h=1e-6)
    scale = max(1.0, np.max(np.abs(A)))
    np.testing.assert_allclose(lin.A, A, rtol=0, atol=1e-7 * scale)
    np.testing.assert_allclose(lin.B, B, rtol=0, atol=1e-7 * max(1.0, np.max(np.abs(B))))


def test_drivers_kept_or_dropped():
    m = cart_pole("cpk")
    m.drive(m.q[0] - 0.2 * sin(m.t), "shake")
    kept = mbforge.linearize(m, q={"cpk_thp": 1.4}, t=0.3, drivers="keep")
    assert kept.coordinates == ["cpk_thp"] and kept.B.shape == (2, 1)
    # the driver moves the cart: at t = 0.3 its velocity is 0.2 cos(0.3)
    assert kept.qd[0] == pytest.approx(0.2 * math.cos(0.3), abs=1e-14)
    d = Dynamics(m.equations())
    A, B = finite_differences(d, kept)
    np.testing.assert_allclose(kept.A, A, rtol=0, atol=1e-8)
    np.testing.assert_allclose(kept.B, 0.0, atol=1e-14)  # the driver absorbs the push
    dropped = mbforge.linearize(m, q={"cpk_xc": 0.0, "cpk_thp": math.pi / 2}, coordinates=["cpk_xc", "cpk_thp"])
    np.testing.assert_allclose(dropped.A, cart_pole_closed_form(True)[0], atol=1e-12)
    with pytest.raises(mbforge.LinearizationError, match="drivers='off': must be one of auto, keep, drop"):
        mbforge.linearize(m, drivers="off")


def test_unknown_names_in_the_operating_point():
    m = fourbar(driven=False)
    with pytest.raises(mbforge.LinearizationError, match="fourbar_free: q: no coordinate called 'xQ'"):
        mbforge.linearize(m, q={"xQ": 0.6})
    with pytest.raises(mbforge.LinearizationError, match="fourbar_free: qd: no coordinate called 'xB_dot'"):
        mbforge.linearize(m, q={"xB": 0.6}, qd={"xB_dot": 0.1})
