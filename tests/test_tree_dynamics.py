"""Forward dynamics and time steps of an unconstrained open tree (kernels.dynamics.tree_forms):
M by the composite-rigid-body algorithm and the bias forces by RNEA at zero acceleration,
factored LDL^T leaves first with constant pivot floors (tree_hints); the forward dynamics
with every product reading its operands as computed (ir.mul_kept, the lowering's `keep`),
so that analysis.ldlback's backward-error bound binds to the tape in c-fixed and, now, in
c-float32 too.

Checked against the model's own Lagrangian equations (M and Q from virtual power, an
independent derivation), and the bounds against the compiled kernels at dense random
states of the declared box."""
import numpy as np
import pytest

from mbforge.examples import load
from mbforge.ir import ZERO, Evaluator, const, mul, mul_kept, symbol
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import actuator_symbols, actuators


def _lagrangian(eqs, X, inputs):
    """qdd = M^-1 (Q + B u) of the model's equations at the states X (numpy solve)."""
    n = len(eqs.q)
    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    Bu = B.matvec(u) if u else [ZERO] * n
    atoms = [eqs.M.entries.get((i, j), eqs.M.entries.get((j, i), ZERO)) for i in range(n) for j in range(n)]
    E = Evaluator(atoms + list(eqs.Q) + list(Bu), inputs)(X)
    M = E[:, :n * n].reshape(-1, n, n)
    return np.linalg.solve(M, (E[:, n * n:n * n + n] + E[:, n * n + n:])[..., None])[..., 0]


@pytest.mark.parametrize("model", ["chain", "sample_arm", "spatial_chain", "branchy.urdf"])
def test_recursive_forms_give_the_lagrangian_accelerations(model):
    from pathlib import Path
    if model.endswith(".urdf"):
        from mbforge.model import from_urdf
        m = from_urdf(Path(__file__).parent / "fixtures" / "urdf" / model)
    else:
        m = load(model)
    eqs = m.equations()
    k = build_kernel(eqs, "forward-dynamics")
    assert "composite-rigid-body" in k.description
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(3).uniform(lo, hi, (400, len(lo)))
    got = Evaluator(k.output_atoms, k.input_symbols)(X)[:, :len(eqs.q)]
    want = _lagrangian(eqs, X, k.input_symbols)
    assert np.abs(got - want).max() <= 1e-11 * max(1.0, np.abs(want).max())


def test_the_tree_kernel_is_cheaper_than_the_lagrangian_one():
    """sample_arm: 578 operations (1,517 from the expanded Lagrangian M and Q before);
    fewer than the articulated-body kernel's 837 at six joints."""
    eqs = load("sample_arm").equations()
    fd = build_kernel(eqs, "forward-dynamics").tape()
    aba = build_kernel(eqs, "forward-dynamics-aba").tape()
    assert len(fd.instrs) < 0.75 * len(aba.instrs)


def test_mul_kept_keeps_a_scaled_operand_whole():
    x, y = symbol("x"), symbol("y")
    cx = mul(const(0.25), x)
    p = mul_kept(cx, y)
    assert p.op == "mul" and cx in p.args  # mul moves the 0.25 out: 0.25 (x y)
    assert mul(cx, y).args[0].op == "const"
    assert mul_kept(const(-0.8), cx).op == "neg" and mul_kept(const(-0.8), cx).args[0].args == (const(0.8), cx)
    assert mul_kept(x, y) is mul(x, y) and mul_kept(const(2.0), x) is mul(const(2.0), x)
    ev = Evaluator([p, mul(cx, y), mul_kept(const(-0.8), cx)], [x, y])(np.array([[1.5, -2.0]]))
    assert ev[0, 0] == ev[0, 1] == -0.75 and ev[0, 2] == pytest.approx(-0.3)


def _errors(tmp_path, name, target, states, seed=11, kernel="forward-dynamics", options=None, **model):
    """(largest |error| per output against c-double at the real inputs, the bounds)."""
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    k = build_kernel(load(name, **model).equations(), kernel, options)
    generate(k, target).write(tmp_path / target)
    generate(k, "c-double").write(tmp_path / "db")
    m, md = Manifest.load(tmp_path / target), Manifest.load(tmp_path / "db")
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(seed).uniform(lo, hi, (states, len(lo)))
    Y, s = hostlib.load_kernel(tmp_path / target)(to_raw(m, X, "inputs"))
    Yd, sd = hostlib.load_kernel(tmp_path / "db")(to_raw(md, X, "inputs"))
    assert (s == 0).all() and (sd == 0).all()
    err = np.abs(from_raw(m, Y, "outputs") - from_raw(md, Yd, "outputs")).max(0)
    bound = np.array([b if b is not None else np.inf for g in m.outputs for b in g.error_bound])
    return err, bound


@pytest.mark.host
@pytest.mark.parametrize("target", ["c-float32", "c-fixed"])
def test_chain_bounds_hold_and_come_within_60_times_the_errors(tmp_path, target):
    """The double pendulum over its declared box (+-100 rad, +-35 rad/s), 20,000 states.
    Measured: bound / largest error 35 (float32), 21 (c-fixed); before the recursive
    forms and the kept products, 4.5e4 and 1.4e4."""
    err, bound = _errors(tmp_path, "chain", target, 20000)
    assert np.isfinite(bound).all() and (err > 0).all()
    assert (err <= bound).all(), (err, bound)
    assert (bound <= 60 * err).all(), bound / err


@pytest.mark.host
def test_sample_arm_float32_gets_a_bound_that_holds(tmp_path):
    """The backward-error bound of the LDL^T solve in float32 (analysis.floaterror): finite
    and sound over the 6-R arm's full joint box, though far from the errors (eta, M's
    perturbation over its eigenvalue floor 0.0025, is about 0.2 in float32; the box's
    bias forces are enclosed 100 times wider than they get)."""
    err, bound = _errors(tmp_path, "sample_arm", "c-float32", 5000)
    assert np.isfinite(bound).all() and (err <= bound).all()


@pytest.mark.host
@pytest.mark.parametrize("target", ["c-float32", "c-fixed"])
def test_chain_rk4_step_holds_its_bounds_within_60_times_the_errors(tmp_path, target):
    """The double pendulum's RK4 step (dt 1 ms) over its declared box, 20,000 states: every
    stage's pivots floored by the links' own inertias (the same at any configuration).
    Measured: bound / largest error 1.6 .. 49 (float32), 1.04 .. 26 (c-fixed); before,
    from the Lagrangian M and Q with cell-wise eigenvalue floors, no float32 bound and
    c-fixed refused (a pivot's error bound reached it), 416 operations against 200."""
    err, bound = _errors(tmp_path, "chain", target, 20000, kernel="step",
                         options={"dt": 1e-3, "integrator": "rk4"}, n=2)
    assert np.isfinite(bound).all() and (err > 0).all()
    assert (err <= bound).all(), (err, bound)
    assert (bound <= 60 * err).all(), bound / err
    k = build_kernel(load("chain", n=2).equations(), "step", {"dt": 1e-3, "integrator": "rk4"})
    assert "composite-rigid-body" in k.description and len(k.tape().instrs) <= 200


@pytest.mark.parametrize("name", ["sample_arm", "spatial_chain"])
def test_rnea_norm_hints_hold_at_random_states(name):
    """kernels.recursive.rnea_norms: every component of the recursion's link vectors and
    every tau within the norm bound at 20,000 states over the declared ranges (the bounds
    are what range analysis then intersects its intervals with), and not vacuous: the
    root joint's torque reaches a tenth of its bound (measured 0.11 and 0.14; the
    distal joints' bounds are looser, a moment's norm being more than its axis' part)."""
    from mbforge.kernels.recursive import open_tree, rate_bounds, rnea
    m = load(name)
    tree = open_tree(m)
    norms: list = []
    tau = rnea(tree, list(m.q), list(m.qd), list(m.qdd), norms, rate_bounds(m.ranges, m.qd, m.qdd))
    assert len(norms) > 12 * len(m.q)
    syms = list(m.q) + list(m.qd) + list(m.qdd)
    lo, hi = np.array([m.ranges[s] for s in syms]).T
    X = np.random.default_rng(2).uniform(lo, hi, (20000, len(syms)))
    n = len(m.q)
    X[:1000, n:] = np.where(X[:1000, n:] > 0, hi[n:], lo[n:])  # rates at their corners
    V = Evaluator([a for a, _, _ in norms], syms)(X)
    bound = np.array([b for _, _, b in norms])
    assert (np.abs(V) <= bound).all()
    T = np.abs(Evaluator(tau, syms)(X)).max(0)
    tb = {a: b for a, _, b in norms}
    root = tree.links[0].j
    assert T[root] >= 0.1 * tb[tau[root]], (T, [tb.get(a) for a in tau])
