"""bench.step compares mbforge with MuJoCo on the same models: the MJCF it builds from the
examples' constants has the examples' geometry, masses and gravity (MuJoCo's accelerations
and tip at mbforge's states), and the same integrator on the same equations gives the same
motion (RK4 in both, the step kernel compiled as the bench runs it)."""
import numpy as np
import pytest

from bench import step as S


def _states(c, t_end=1.0):
    """Consistent states along the reference motion from the model's initial state, with
    mbforge's accelerations there."""
    from mbforge.reference import Dynamics

    d = Dynamics(S.equations(c))
    n = len(d.eqs.q)
    x = S.start(d.eqs)
    tr = d.forward(t_end, x[:n], x[n:], dt=t_end / 4)
    return [(q, qd, d.accelerations(0.0, q, qd)[0]) for q, qd in zip(tr.Q, tr.QD)]


@pytest.mark.parametrize("name", ["pendulum", "chain3", "nfourbar3"])
def test_mujoco_model_is_mbforges(name):
    import mujoco

    c = S.case(name)
    closed = "<equality>" in c.mjcf
    states = _states(c)
    sim = S.MuJoCo(c, "Euler", 1e-3, True, *states[0][:2])
    m, d = sim.m, sim.d
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, c.site)
    scale = max(np.max(np.abs(c.to_mujoco(*s)[2])) for s in states)
    for q, qd, qdd in states:
        qpos, qvel, qacc = c.to_mujoco(q, qd, qdd)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        assert np.allclose(d.site_xpos[site, :2], c.tip(q[None])[0], rtol=0, atol=1e-12)
        if closed:  # every loop closed at mbforge's state: the lengths agree
            assert np.max(np.abs(d.efc_pos[:d.ne])) < 1e-12
        # MuJoCo's equality constraints are soft (solimp 0.9999) and leave out J' qd: close, not equal
        assert np.allclose(d.qacc, qacc, rtol=0, atol=(2e-3 if closed else 1e-9) * scale)


def test_nfourbar_in_mujoco_follows_the_reference_and_a_heavier_coupler_does_not():
    """The loose acceleration check above cannot see a mass (the 1-DOF motion barely moves
    with one coupler's); the motion over 2 s can: 1.5e-5 m off the reference, 3.8e-3 m with
    one coupler 5% heavier."""
    c = S.case("nfourbar3")
    ref = S.reference(c, 2.0)
    n = len(S.equations(c).q)
    x = S.start(S.equations(c))
    sim = S.MuJoCo(c, "RK4", 2e-3, True, x[:n], x[n:])
    assert S._error(sim.tips(2.0), ref) < 1e-4
    sim.m.body_mass[sim.m.body("coupler1").id] *= 1.05
    assert S._error(sim.tips(2.0), ref) > 1e-3


@pytest.mark.host
def test_step_kernel_and_mujoco_rk4_agree(tmp_path):
    """The chain of two by RK4 at dt 10 ms: the generated step kernel in the bench's C loop
    and MuJoCo's RK4 integrate the same equations, so the same tips to rounding (2.4e-15
    measured), and both within 1e-5 of the reference."""
    c = S.case("chain2")
    x = S.start(S.equations(c))
    tips, failed = S.Stepper(c, "rk4", 0.01, tmp_path).tips(2.0)
    assert failed is None and len(tips) == 101
    assert np.max(np.abs(tips - S.MuJoCo(c, "RK4", 0.01, False, x[:2], x[2:]).tips(2.0))) < 1e-12
    assert S._error(tips, S.reference(c, 2.0)) < 1e-5
