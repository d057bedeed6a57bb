"""Bad models and bad configurations give errors that say what is wrong and where."""
import math
import warnings

import numpy as np
import pytest

from mbforge.examples import fourbar, load
from mbforge.ir import cos, sin, symbol
from mbforge.model import Model, ModelError
from mbforge.model.natural import NaturalBody2D, NaturalBody3D, point, unit_vector
from mbforge.reference import (AssemblyError, Dynamics, DynamicsError, Kinematics, RedundantConstraintsWarning,
                               SingularJacobianError)


def _fourbar(name, coupler=3.5, extra_bar=False):
    """Four-bar in natural coordinates with a chosen coupler; extra_bar adds a fifth bar."""
    m = Model(name)
    xB = m.coordinate(f"{name}_xB", guess=1.0, range=(-2, 2))
    yB = m.coordinate(f"{name}_yB", guess=0.1, range=(-2, 2))
    xC = m.coordinate(f"{name}_xC", guess=3.0, range=(-5, 7))
    yC = m.coordinate(f"{name}_yC", guess=1.0, range=(-5, 5))
    m.constraint(xB * xB + yB * yB - 1.0, "bar_AB")
    m.constraint((xC - xB) ** 2 + (yC - yB) ** 2 - coupler ** 2, "bar_BC")
    m.constraint((xC - 4.0) ** 2 + yC * yC - 2.5 ** 2, "bar_CD")
    return m, (xB, yB, xC, yC)


# ---- assembly, singular and redundant Jacobians -------------------------------------------------
def test_mechanism_that_cannot_close():
    m, _ = _fourbar("short_coupler", coupler=0.4)  # 1 + 0.4 + 2.5 < 4: the loop cannot close
    kin = Kinematics(m.equations())
    with pytest.raises(AssemblyError, match=r"short_coupler: position problem at t=0.0 did not close after 50 "
                                            r"iterations; residual [0-9.e-]+ in bar_"):
        kin.position(0.0, [m.guess[s] for s in m.q])


def test_singular_jacobian_names_the_coordinates_that_lose_rank():
    """A slider-crank driven by its slider: at the dead point (slider at full stretch, 3)
    the crank and rod angles are free to first order."""
    m = Model("slider_driven")
    a = m.coordinate("sd_crank", guess=0.3, range=(-4, 4))
    b = m.coordinate("sd_rod", guess=-0.15, range=(-4, 4))
    s = m.coordinate("sd_slider", guess=2.9, range=(0, 4))
    m.constraint(cos(a) + 2 * cos(b) - s, "loop_x")
    m.constraint(sin(a) + 2 * sin(b), "loop_y")
    m.drive(s - (3.0 - 0.5 * (1 - cos(m.t))), "slider_law")  # reaches 3 at t = 0
    kin = Kinematics(m.equations())
    q = kin.position(1.0, [m.guess[x] for x in m.q])  # a regular configuration first
    assert kin.redundant == []
    qdead = np.array([0.0, 0.0, 3.0])
    with pytest.raises(SingularJacobianError, match=r"slider_driven: singular Jacobian at t=0.0: rank 2 for 3 "
                                                    r"velocity unknowns; the lost rank lets these coordinates move: "
                                                    r"sd_crank \(0.89\), sd_rod \(0.45\)"):
        kin.velocity(0.0, qdead)
    assert np.all(np.isfinite(kin.velocity(1.0, q)))


def test_redundant_constraints_are_reported_and_handled():
    """A parallelogram with a fifth bar parallel to the crank: one equation too many."""
    m = Model("parallelogram5")
    xB = m.coordinate("p5_xB", guess=math.cos(1.0), range=(-2, 2))
    yB = m.coordinate("p5_yB", guess=math.sin(1.0), range=(-2, 2))
    xC = m.coordinate("p5_xC", guess=2 + math.cos(1.0), range=(-2, 4))
    yC = m.coordinate("p5_yC", guess=math.sin(1.0), range=(-2, 2))
    m.constraint(xB * xB + yB * yB - 1.0, "bar_AB")
    m.constraint((xC - xB) ** 2 + (yC - yB) ** 2 - 4.0, "bar_BC")
    m.constraint((xC - 2.0) ** 2 + yC * yC - 1.0, "bar_DC")
    xm, ym = (xB + xC) * 0.5, (yB + yC) * 0.5  # the coupler's midpoint, on a bar from (1, 0)
    m.constraint((xm - 1.0) ** 2 + ym * ym - 1.0, "bar_mid")
    m.drive(xB * sin(m.t + 1.0) - yB * cos(m.t + 1.0), "crank")
    kin = Kinematics(m.equations())
    with pytest.warns(RedundantConstraintsWarning, match=r"parallelogram5: 1 redundant equation\(s\) at t=0.0: "
                                                         r"bar_mid \(rank 4 of 5; the dependent set is "):
        Q, QD, QDD = kin.motion(np.linspace(0.0, 1.0, 5))
    assert kin.redundant == ["bar_mid"]
    th = 1.0 + np.linspace(0.0, 1.0, 5)
    assert np.allclose(Q[:, 0], np.cos(th), atol=1e-12) and np.allclose(Q[:, 2], 2 + np.cos(th), atol=1e-12)
    assert np.allclose(QD[:, 1], np.cos(th), atol=1e-10)


def test_underdetermined_velocity_and_user_fixed_coordinates():
    m = fourbar.build(driven=False)
    kin = Kinematics(m.equations())
    q0 = [1.0, 0.1, 3.0, 2.5]
    # initial position with a user-fixed coordinate: the crank at 60 degrees
    q = kin.position(0.0, q0, fixed={"xB": 0.5})
    assert q[0] == 0.5 and q[1] == pytest.approx(math.sqrt(0.75), rel=1e-12)
    assert np.max(np.abs(kin.residual(0.0, q))) < 1e-12
    with pytest.raises(SingularJacobianError, match=r"fourbar_free: the velocity problem at t=0.0 is underdetermined: "
                                                    r"rank 3 for 4 unknowns; fix 1 more velocity\(s\) among "):
        kin.velocity(0.0, q)
    qd = kin.velocity(0.0, q, fixed={"xB": -0.8})  # initial velocity problem, one velocity given
    assert qd[0] == -0.8 and np.max(np.abs(kin.jacobian(0.0, q) @ qd)) < 1e-12


# ---- dynamics -----------------------------------------------------------------------------------
def test_missing_inertia_is_reported_with_the_coordinate():
    """A massless second bar pinned at its middle to a pendulum: nothing sets its rotation."""
    m = Model("massless_bar")
    c = {n: m.coordinate(f"mb_{n}", guess=g, range=(-4, 4)) for n, g in
         (("x1", 0.0), ("y1", 0.0), ("t1", -1.0), ("x2", 0.0), ("y2", -1.0), ("t2", -1.2))}
    g = m.ground(dim=2)
    b1 = m.body2d("bar1", c["x1"], c["y1"], c["t1"], mass=1.0, com=(0.5, 0), inertia=1 / 12)
    b2 = m.body2d("bar2", c["x2"], c["y2"], c["t2"])  # no mass, no inertia
    m.revolute2d(g, (0, 0), b1, (0, 0), "pin1")
    m.revolute2d(b1, (1, 0), b2, (0.5, 0), "pin2")
    m.gravity((0, -9.81))
    d = Dynamics(m.equations())
    with pytest.raises(DynamicsError, match=r"massless_bar: missing inertia: at t=0.0 the accelerations of "
                                            r"mb_t2 \([0-9.]+\), mb_[xy]2 \([0-9.]+\), mb_[xy]2 \([0-9.]+\) are set "
                                            r"neither by a mass nor by a constraint; give the bodies"):
        d.forward(1.0)


def test_coordinate_without_inertia_or_equation_is_a_model_error():
    m = Model("loose_coordinate")
    x = m.coordinate("lc_x", range=(-1, 1))
    m.coordinate("lc_spare", range=(-1, 1))
    m.body2d("b", x, 0.0, 0.0, mass=1.0)
    with pytest.raises(ModelError, match=r"loose_coordinate: coordinate\(s\) lc_spare have no inertia and appear in "
                                         r"no equation"):
        m.equations()


def test_dynamics_needs_inertia():
    m, _ = _fourbar("no_mass")
    with pytest.raises(DynamicsError, match="no_mass: the model has no inertia"):
        Dynamics(m.equations())


def test_inverse_dynamics_that_the_actuators_cannot_produce():
    """pendulum_block driven in both coordinates but actuated only at the pivot: nothing can
    push the block."""
    m = load("pendulum_block")
    xb, thp = m.q[0], m.q[5]
    m.drive(xb - 0.1 * sin(m.t), "block_law")
    m.drive(thp - (-math.pi / 2 + 0.2 * sin(m.t)), "swing_law")
    m.actuator("pivot_torque", thp)
    d = Dynamics(m.equations())
    with pytest.raises(DynamicsError, match=r"pendulum_block: at t=0.5 the actuators and constraint reactions cannot "
                                            r"produce this motion: residual [0-9.e-]+, largest in coordinates "
                                            r"x[bp] \(0.10\), x[bp] \(0.10\)"):
        d.inverse_motion([0.5])


def test_inverse_dynamics_with_undetermined_actuators():
    m = fourbar.build(inertia=True)
    m.actuator("second_crank_torque", m.outputs["crank_angle"])
    d = Dynamics(m.equations())
    with pytest.raises(DynamicsError, match=r"fourbar: at t=0.0 the actuator forces are not determined: "
                                            r"(second_)?crank_torque \(0.71\), (second_)?crank_torque \(0.71\) "
                                            r"can be traded"):
        d.inverse_motion([0.0])


# ---- model-building errors name the model and the part ---------------------------------------------
def test_model_building_errors():
    m = Model("errs")
    x = m.coordinate("errs_x", range=(-1, 1))
    with pytest.raises(ModelError, match="errs: coordinate 'errs_x' is defined twice"):
        m.coordinate("errs_x")
    with pytest.raises(ModelError, match=r"errs: coordinate 'errs_y': guess 3 is outside its range \(-1, 1\)"):
        m.coordinate("errs_y", guess=3, range=(-1, 1))
    with pytest.raises(ModelError, match=r"errs: coordinate 'errs_z' has an empty velocity range \(1, 1\)"):
        m.coordinate("errs_z", vrange=(1, 1))
    m.constraint(x - 0.5, "c1")
    with pytest.raises(ModelError, match="errs: equation 'c1' is defined twice"):
        m.constraint(x + 0.5, "c1")
    with pytest.raises(ModelError, match="errs: constraint 'c2' depends on errs_foreign, which are not coordinates"):
        m.constraint(x * symbol("errs_foreign"), "c2")
    with pytest.raises(ModelError, match="errs: constraint 'c3' is the constant 2.0: it constrains nothing"):
        m.constraint(x * 0 + 2.0, "c3")
    with pytest.raises(ModelError, match="errs: velocity constraint 'v1' is not linear in the velocities"):
        m.velocity_constraint(m.qd[0] * m.qd[0], "v1")
    with pytest.raises(ModelError, match="errs: velocity constraint 'v2' does not involve any velocity"):
        m.velocity_constraint(x, "v2")
    m.body2d("blk", x, 0.0, 0.0, mass=1.0)
    with pytest.raises(ModelError, match="errs: body 'blk' is defined twice"):
        m.body2d("blk", x, 0.0, 0.0)
    with pytest.raises(ModelError, match="errs: body 'neg': negative mass -1"):
        m.body2d("neg", x, 0.0, 0.0, mass=-1.0)
    with pytest.raises(ModelError, match="errs: body 'bad_inertia': inertia about the centre of mass is not positive"):
        m.body3d("bad_inertia", [x, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], mass=1.0, inertia=(1.0, -2.0, 1.0))
    m.actuator("a_const", x * 0 + 1.0)
    with pytest.raises(ModelError, match="errs: actuator 'a_const' acts on no coordinate"):
        m.equations()
    with pytest.raises(ModelError, match="model name 'bad name' must be an identifier"):
        Model("bad name")


def test_loop_and_joint_errors():
    m = Model("loops")
    a = m.coordinate("loops_a", range=(-4, 4))
    tree = m.relative()
    b = tree.base("arm", tree.world, (0, 0, 1), a)
    p = tree.point("tip", tree.origin, (1.0, 0.0, 0.0), b)
    q = tree.point("far", tree.origin, (0.0, 0.0, 5.0), tree.world)
    with pytest.raises(ModelError, match="loops: loop 'l1': component z is the constant 5.0, so the loop cannot "
                                         "close"):
        tree.loop(p, q, tree.world, "l1")
    with pytest.raises(ModelError, match="loops: relative base or point 'arm' is defined twice"):
        tree.base("arm", tree.world, (1, 0, 0), a)
    with pytest.raises(ModelError, match="loops: fixed base 'F': the matrix is not a rotation"):
        tree.fixed_base("F", tree.world, np.diag([1.0, 1.0, 2.0]))


def test_natural_body_errors():
    m = Model("natural_errs")
    P = point(m, "ne_P", (0.0, 0.0, 0.0), range=(-2, 2))
    Qp = point(m, "ne_Q", (1.0, 0.0, 0.0), range=(-2, 2))
    bar = NaturalBody3D(m, "rod", [(P, (0, 0, 0)), (Qp, (1, 0, 0))])
    with pytest.raises(Exception, match="body 'rod': point \\(0.0, 1.0, 0.0\\) is outside the span"):
        bar.point((0.0, 1.0, 0.0))
    bar.set_inertia(1.0, com=(0.5, 0, 0), inertia=(0.1, 0.1, 0.1))  # mass off the rod's line
    with pytest.raises(ModelError, match="natural_errs: body 'rod': its inertia has mass outside the span of its "
                                         "points"):
        m.equations()
    m2 = Model("natural_errs2")
    A = point(m2, "ne2_A", (0.0, 0.0), range=(-2, 2))
    with pytest.raises(Exception, match="body 'flat': its two points coincide"):
        NaturalBody2D(m2, "flat", A, A, local_j=(0.0, 0.0))
    u = unit_vector(m2, "ne2_u", (0, 0, 2))
    assert m2.guess[u.r[2]] == 1.0 and m2.phi_names == ["ne2_u_norm"]


def test_unknown_motion():
    with pytest.raises(ModelError, match="stewart: no motion 'surge'; known: heave, yaw, roll, pitch"):
        load("stewart", motion="surge")
    with pytest.raises(ModelError, match="stewart_relative: no motion 'surge'"):
        load("stewart_relative", motion="surge")


def test_no_warning_for_regular_models():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Kinematics(fourbar.build().equations()).motion([0.0, 1.0])
