"""Small models shared by several test modules, the heading fixture's consistent states,
a kernel's inputs from named states, whether a cover's boxes hold given states, and the
recursive kernels of a model against its M(q)-based equations."""
import importlib.util
import math

import numpy as np

from mbforge.ir import Evaluator, cos, sin
from mbforge.kernels.recursive import aba_kernel, mass_matrix_crba_kernel, rnea_kernel
from mbforge.model import Model

from . import FIXTURES

G = 9.81
M_CART, M_POLE, L_COM, I_POLE = 1.3, 0.4, 0.6, 0.05  # pole: centre of mass L_COM from the pivot


def cart_pole(prefix: str, travel=((-2, 2), (-5, 5), (-50, 50)), still=((-0.1, 0.1), None, None),
              pole=((-7, 7), (-20, 20), (-99, 99))) -> Model:
    """A cart on a rail (prismatic joint) pushed by a force, a pole on a revolute joint at the
    cart's centre: 2-D reference-point coordinates, 6 coordinates, 4 equations. travel,
    still, pole: (range, vrange, arange) of the cart's and pole's x, of the coordinates the
    joints hold (y, angle of the cart, y of the pole), of the pole's angle (None: the
    model's default)."""

    def coordinate(name, ranges, **kw):
        r, v, a = ranges
        return m.coordinate(f"{prefix}_{name}", range=r, **({"vrange": v} if v else {}),
                            **({"arange": a} if a else {}), **kw)

    m = Model(f"{prefix}_cartpole")
    xc, yc, thc = coordinate("xc", travel), coordinate("yc", still), coordinate("thc", still)
    xp, yp = coordinate("xp", travel), coordinate("yp", still)
    thp = coordinate("thp", pole, guess=math.pi / 2)
    ground = m.ground(dim=2)
    cart = m.body2d("cart", xc, yc, thc, mass=M_CART, inertia=0.1)
    pole_ = m.body2d("pole", xp, yp, thp, mass=M_POLE, com=(L_COM, 0.0), inertia=I_POLE)
    m.prismatic2d(ground, (0.0, 0.0), cart, (0.0, 0.0), (0.0, 1.0), "rail")
    m.revolute2d(cart, (0.0, 0.0), pole_, (0.0, 0.0), "pivot")
    m.gravity((0.0, -G))
    m.actuator("push", xc)
    m.output("tip_x", pole_.point((2 * L_COM, 0.0))[0])
    return m


def cart_pole_closed_form(upright: bool):
    """Cart-pole linearized about the pole up (phi = 0) or down, state (x, phi, x', phi')."""
    p = I_POLE * (M_CART + M_POLE) + M_CART * M_POLE * L_COM ** 2
    s = 1.0 if upright else -1.0
    A = np.zeros((4, 4))
    A[0, 2] = A[1, 3] = 1.0
    A[2, 1] = M_POLE ** 2 * G * L_COM ** 2 / p
    A[3, 1] = s * (M_CART + M_POLE) * M_POLE * G * L_COM / p
    B = np.array([[0.0], [0.0], [(I_POLE + M_POLE * L_COM ** 2) / p], [s * M_POLE * L_COM / p]])
    return A, B


def double_pendulum() -> Model:
    """Two bars in relative coordinates (no constraints), a motor at each joint, a damper."""
    m = Model("dpl")
    a = m.coordinate("dpl_a", guess=-1.2, range=(-9, 9), vrange=(-20, 20), arange=(-99, 99))
    b = m.coordinate("dpl_b", guess=0.4, range=(-9, 9), vrange=(-20, 20), arange=(-99, 99))
    tree = m.relative()
    b1 = tree.base("upper_axes", tree.world, (0.0, 0.0, 1.0), a)
    b2 = tree.base("lower_axes", b1, (0.0, 0.0, 1.0), b)
    elbow = tree.point("elbow", tree.origin, (1.0, 0.0, 0.0), b1)
    tree.body("upper", b1, tree.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 1 / 12, 1 / 12))
    tree.body("lower", b2, elbow).set_inertia(0.7, com=(0.4, 0.0, 0.0), inertia=(0.0, 0.05, 0.05))
    m.gravity((0.0, -G, 0.0))
    m.actuator("shoulder", a)
    m.actuator("elbow_motor", b)
    m.spring_damper("elbow_damper", b, k=3.0, c=0.2)
    m.output("hand_y", tree.position(tree.origin, tree.point("hand", elbow, (0.8, 0.0, 0.0), b2), tree.world)[1])
    return m


def sled_with_trailer(prefix: str = "st") -> Model:
    """A knife-edge sled towing a trailer on a hitch: 6 coordinates, 2 holonomic equations
    (the hitch), 2 velocity constraints (the two blades): 2 velocity degrees of freedom."""
    m = Model(f"{prefix}_sled")
    sx = m.coordinate(f"{prefix}_sx", guess=0.0, range=(-5, 5), vrange=(-3, 3), arange=(-9, 9))
    sy = m.coordinate(f"{prefix}_sy", guess=0.0, range=(-5, 5), vrange=(-3, 3), arange=(-9, 9))
    sth = m.coordinate(f"{prefix}_sth", guess=0.1, range=(-4, 4), vrange=(-3, 3), arange=(-9, 9))
    tx = m.coordinate(f"{prefix}_tx", guess=-0.5, range=(-5, 5), vrange=(-3, 3), arange=(-9, 9))
    ty = m.coordinate(f"{prefix}_ty", guess=0.0, range=(-5, 5), vrange=(-3, 3), arange=(-9, 9))
    tth = m.coordinate(f"{prefix}_tth", guess=-0.2, range=(-4, 4), vrange=(-3, 3), arange=(-9, 9))
    sled = m.body2d("sled", sx, sy, sth, mass=2.0, inertia=0.3)
    trailer = m.body2d("trailer", tx, ty, tth, mass=1.0, com=(-0.5, 0.0), inertia=0.1)
    m.revolute2d(sled, (-0.5, 0.0), trailer, (0.0, 0.0), "hitch")
    sxd, syd = m.qd[0], m.qd[1]
    m.velocity_constraint(-sin(sth) * sxd + cos(sth) * syd, "sled_blade")
    wheel = trailer.point((-1.0, 0.0))
    vw = [m.rate(c) for c in wheel]
    m.velocity_constraint(-sin(tth) * vw[0] + cos(tth) * vw[1], "trailer_blade")
    m.actuator("thrust", sx * cos(sth) + sy * sin(sth))  # pushes along the sled's heading (at its pose)
    m.actuator("steer", sth)
    m.output("trailer_wheel_x", wheel[0])
    return m


def _fixture(name: str):
    """A model file of tests/fixtures as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_fixture", FIXTURES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


H = _fixture("heading")  # tests/fixtures/heading.py
N = 20001  # headings in the dense sweep


def heading_sweep(n: int = N, seed: int = 0) -> dict:
    """Consistent states over the envelope: every heading on a fine grid (both ends and
    +-90 degrees included), rates and accelerations uniform in their ranges, the torque
    uniform in its range."""
    rng = np.random.default_rng(seed)
    th = np.concatenate([np.linspace(-math.pi, math.pi, n), [-math.pi / 2, math.pi / 2]])
    w = rng.uniform(-H.RATE, H.RATE, len(th))
    a = rng.uniform(-H.ACCEL, H.ACCEL, len(th))
    c, s = np.cos(th), np.sin(th)
    return {"x": H.L * c, "y": H.L * s, "x_d": -H.L * s * w, "y_d": H.L * c * w,
            "x_dd": -H.L * (s * a + c * w * w), "y_dd": H.L * (c * a - s * w * w),
            "u_torque": rng.uniform(-300.0, 300.0, len(th)), "t": np.zeros(len(th)), "heading": th}


def kernel_inputs(kernel, states) -> np.ndarray:
    """The rows of a kernel's inputs from states named by its input symbols."""
    cols = []
    for s in kernel.input_symbols:
        name = s.value.name
        if name not in states:
            raise AssertionError(f"the sweep has no value for the input {name}")
        cols.append(states[name])
    return np.column_stack(cols)


def in_cover(cover, X, syms, slack: float = 0.0) -> np.ndarray:
    """Per row of X (values of syms), whether some box of the cover holds it."""
    cols = [cover.symbols.index(s) for s in syms]
    inside = np.zeros(len(X), dtype=bool)
    for b in range(len(cover)):
        inside |= np.all((X >= cover.lo[b, cols] - slack) & (X <= cover.hi[b, cols] + slack), axis=1)
    return inside


def _mass_matrix(eqs, X):
    """(M, Q) at each row of X = [q, qd, ...] (numpy, from the equations' atoms)."""
    n = len(eqs.q)
    ev = Evaluator(list(eqs.M.values()) + list(eqs.Q), list(eqs.q) + list(eqs.qd))
    vals = ev(X[:, :2 * n])
    nm = len(eqs.M.entries)
    out = []
    for row in vals:
        M = np.zeros((n, n))
        for (i, j), v in zip(eqs.M.pattern, row[:nm]):
            M[i, j] = v
        out.append((M, row[nm:]))
    return out


def check_recursive(model, samples=6, seed=0, inverse=True):
    """RNEA's forces equal M qdd - Q, ABA's accelerations solve M qdd = Q + B u and CRBA's
    matrix is M, at random states (1e-10 relative); (rnea, aba) kernels."""
    eqs = model.equations()
    n = len(eqs.q)
    kr, ka, kc = rnea_kernel(eqs) if inverse else None, aba_kernel(model), mass_matrix_crba_kernel(model)
    assert kr is None or [p.name for p in kr.inputs] == ["q", "qd", "qdd", "t"]
    assert [p.name for p in ka.inputs][:3] == ["q", "qd", "t"]
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, (samples, 3 * n + 1))
    U = rng.uniform(-2.0, 2.0, (samples, len(model.actuators)))
    tau = Evaluator(kr.output_atoms, kr.input_symbols)(X) if inverse else None
    XA = np.hstack([X[:, :2 * n], X[:, 3 * n:], U]) if model.actuators else np.hstack([X[:, :2 * n], X[:, 3 * n:]])
    qdd = Evaluator(ka.output_atoms, ka.input_symbols)(XA)
    B = np.zeros((n, len(model.actuators)))
    for (i, k), a in eqs.B.entries.items():
        B[i, k] = a.value
    Mc = Evaluator(kc.output_atoms, kc.input_symbols)(X[:, :n])
    for s, (M, Q) in enumerate(_mass_matrix(eqs, X)):
        crba = np.zeros((n, n))
        crba[tuple(np.array(kc.outputs[0].pattern).T)] = Mc[s]
        assert np.allclose(crba, M, rtol=1e-10, atol=1e-10 * np.abs(M).max())
        if inverse:
            ref = M @ X[s, 2 * n:3 * n] - Q
            got = B @ tau[s] if model.actuators else tau[s]
            assert np.allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
        ref_qdd = np.linalg.solve(M, Q + B @ U[s]) if model.actuators else np.linalg.solve(M, Q)
        assert np.allclose(qdd[s], ref_qdd, rtol=1e-10, atol=1e-10 * np.abs(ref_qdd).max())
    return kr, ka
