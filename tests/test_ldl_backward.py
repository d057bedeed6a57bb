"""analysis.ldlback: the c-fixed forward dynamics of an unconstrained open tree (M factored
LDL^T leaves first) gets its error bound from a backward-error argument (the computed
factors are exact for M + Delta, ||Delta|| below M's eigenvalue floor) instead of op-by-op
propagation through the elimination, which refused sample_arm (a pivot's error 26 against
its floor 0.02). Checked on the compiled kernel against the compiled c-double one at 5,000
random states of the declared box; the bound holds but is far from tight (see the test)."""
import dataclasses

import numpy as np
import pytest
import scipy.linalg

from mbforge.examples import load
from mbforge.kernels.builders import build_kernel


@pytest.mark.host
@pytest.mark.parametrize("example,kernel,target", [
    ("sample_arm", "forward-dynamics", "c-fixed"), ("sample_arm", "forward-dynamics", "c-float32"),
    ("spatial_chain", "forward-dynamics", "c-fixed"), ("sample_arm", "forward-dynamics-aba", "c-fixed"),
    ("sample_arm", "forward-dynamics-aba", "c-float32"), ("spatial_chain", "forward-dynamics-aba", "c-fixed"),
    ("spatial_chain", "forward-dynamics-aba", "c-float32"),
    ("chain:5", "forward-dynamics", "c-fixed"), ("chain:5", "forward-dynamics", "c-float32")])
def test_tree_forward_dynamics_holds_its_bound_at_random_states(tmp_path, example, kernel, target):
    """Status 0 and every qdd within its manifest bound of c-double's at 5,000 states
    uniform over the box (angles over a period, the declared rates and torques). Measured
    for sample_arm (M by CRBA, Q by RNEA with its vectors' norm bounds, lambda floored at
    0.0033 with weighted joints: tests/test_tree_dynamics.py): c-fixed errors 0.07 .. 1.2
    rad/s^2 (|qdd| up to 2,100: M^-1 is only bounded by 1/lambda = 300 and the bias forces'
    enclosure is still about ten times their largest value), bound 1.6e4: sound, not useful
    (from the Lagrangian M and Q: errors 0.5 .. 34, bound 2.2e6). spatial_chain (its rods
    turn about their own axes, 1e-4 kg m^2: lambda floored at 2.65e-5) generates in c-fixed
    since its third joint's step divides by the pivot (kernels.dynamics._divided); its bound
    is 1e7, useless too. The ABA's articulated inertias are bounded backward too
    (analysis.ababack): sample_arm's float32 ABA gets a bound (it had none) and
    spatial_chain's c-fixed ABA generates (it was refused), both bounds useless (the bias
    and acceleration passes stay op by op); spatial_chain's float32 ABA gets one (it had
    none) since a body's perturbation is measured against its own inertia
    (bodyfloors.body_eta), useless too. A planar chain's rods have no principal
    inertia floor, but only their inertia about the common axis enters its kinetic energy
    (bodyfloors._planar): the 5-link chain's forward dynamics generates in c-fixed (it was
    refused) and gets float32 bounds (it had none)."""
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    name, _, n = example.partition(":")
    k = build_kernel((load(name, n=int(n)) if n else load(name)).equations(), kernel)
    generate(k, target).write(tmp_path / "fx")
    generate(k, "c-double").write(tmp_path / "db")
    m, md = Manifest.load(tmp_path / "fx"), Manifest.load(tmp_path / "db")
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(5).uniform(lo, hi, (5000, len(lo)))
    Yf, sf = hostlib.load_kernel(tmp_path / "fx")(to_raw(m, X, "inputs"))
    bound = np.array([b for g in m.outputs for b in g.error_bound])
    assert (sf == 0).all() and np.isfinite(bound).all()
    # against double at the inputs the kernel reads, and at the real ones (the bound covers
    # the inputs' rounding too)
    for Xd in (from_raw(m, to_raw(m, X, "inputs"), "inputs"), X):
        Yd, sd = hostlib.load_kernel(tmp_path / "db")(to_raw(md, Xd, "inputs"))
        assert (sd == 0).all()
        err = np.abs(from_raw(m, Yf, "outputs") - from_raw(md, Yd, "outputs")).max(0)
        assert (err <= bound).all() and err.max() > 0, (err, bound)
        print("bound / measured:", bound / err)


def test_a_wide_pivot_divides_and_its_roles_bind():
    """spatial_chain's joint th2 turns a rod about its own axis: its pivot is proven only in
    [2e-4, 1.92], so its step divides by the pivot (a fixed-point reciprocal over that range
    rounds 1e2 times coarser than the quotients); the roles replay the quotients and bind;
    sample_arm (every pivot within 256 times its floor, but its root's, which has no
    multipliers) multiplies by reciprocals throughout."""
    chain = build_kernel(load("spatial_chain").equations(), "forward-dynamics")
    F = chain.info.solves["KKT"]
    assert [st.idx[0] for st in F.steps if st.divided] == [2]
    tape = chain.tape()
    bound = chain.info.enclosures[0].roles.bind(tape)
    assert bound is not None
    writer = {i.dst[0]: i for i in tape.instrs}
    (step,) = [st for st in bound.steps if st[0] == 2]
    assert step[2] is None and all(writer[t].op == "div" for t in step[3].values())
    arm = build_kernel(load("sample_arm").equations(), "forward-dynamics")
    assert not any(st.divided for st in arm.info.solves["KKT"].steps)


def test_the_roles_bind_only_to_their_own_tape():
    """The backward bound applies only where every instruction of the solve is one of the
    replayed roles: sample_arm's roles on its own tape bind, on spatial_chain's tape (or
    with one role's atom missing) they do not."""
    arm = build_kernel(load("sample_arm").equations(), "forward-dynamics")
    chain = build_kernel(load("spatial_chain").equations(), "forward-dynamics")
    roles = arm.info.enclosures[0].roles
    assert roles.bind(arm.tape()) is not None
    assert roles.bind(chain.tape()) is None
    tape = arm.tape()
    tape.instrs = [i for i in tape.instrs if i.dst[0] != roles.bind(tape).steps[2][2]]  # drop a reciprocal
    assert roles.bind(tape) is None


def test_the_articulated_body_roles_bind_only_to_their_own_tape():
    """analysis.ababack applies where the tape computes each multiplier, product and
    projection entry of the ABA's inward pass as replayed: sample_arm's roles bind to its
    own tape, not to spatial_chain's, nor with a multiplier's instruction changed."""
    arm = build_kernel(load("sample_arm").equations(), "forward-dynamics-aba")
    chain = build_kernel(load("spatial_chain").equations(), "forward-dynamics-aba")
    roles = arm.info.enclosures[0].roles
    tape = arm.tape()
    bound = roles.bind(tape)
    assert bound is not None and roles.bind(chain.tape()) is None
    us = next(t for b in bound.links for t in b.Us if t is not None)
    tape.instrs = [dataclasses.replace(i, op="add") if i.dst[0] == us else i for i in tape.instrs]
    assert roles.bind(tape) is None


def test_a_body_perturbation_is_measured_in_its_own_inertia():
    """bodyfloors.body_eta: |V^T Delta V| <= eta V^T I V for every twist V and every Delta
    within its entrywise bound E, checked at random twists (the worst direction included)
    and random Delta; a rod's errors across its axis count against its inertia across it
    (eta far below delta / mu, mu its inertia about its axis), not about it."""
    from types import SimpleNamespace
    from mbforge.analysis.bodyfloors import body_eta
    m, L = 0.5, 0.6  # a rod along x from the origin: 1e-4 kg m^2 about its own axis
    I = np.diag([1e-4, m * L * L / 3, m * L * L / 3])
    h = np.array([m * L / 2, 0.0, 0.0])
    H = np.array([[0, -h[2], h[1]], [h[2], 0, -h[0]], [-h[1], h[0], 0]])
    S6 = np.block([[I, H], [H.T, m * np.eye(3)]])
    w, V = np.linalg.eigh(S6)
    W = (V / np.sqrt(w)) @ V.T
    R = SimpleNamespace(W=np.abs(W), w2=np.linalg.norm(W, 2) ** 2 * (1 + 1e-9), mu=w[0] * (1 - 1e-9),
                        g=np.linalg.eigvalsh(W.T @ S6 @ W)[0] * (1 - 1e-9))
    E = np.full((6, 6), 1e-7)
    E[0, :] = E[:, 0] = 0.0  # no error about the rod's axis
    delta, eta = body_eta(R, E, 2e-8)
    assert eta < 0.05 * delta / R.mu
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(500):
        D = E * rng.uniform(-1, 1, (6, 6))
        D = (D + D.T) / 2  # within E entry by entry
        P = rng.normal(size=(6, 6))
        D += (P + P.T) / np.linalg.norm(P + P.T, 2) * 2e-8  # and a part of norm 2e-8
        # the largest |V^T Delta V| / V^T I V over every twist V: a generalized eigenvalue
        worst = max(worst, np.abs(scipy.linalg.eigh(D, S6, eigvals_only=True)).max())
    assert worst <= eta and worst > 0.05 * eta, (worst, eta)
    print("worst / eta", worst / eta, "eta", eta, "delta / mu", delta / R.mu)


def _energy_check(eqs, states=20000):
    """(largest sqrt(b^T M^-1 b) of the bias forces at random states, its bound)."""
    from mbforge.ir import Evaluator
    from mbforge.kernels.dynamics import tree_forms, tree_order
    from mbforge.kernels.recursive import bias_energy_bound, bias_energy_factors
    order, links, tree = tree_order(eqs)
    factors = bias_energy_factors(tree)
    assert factors is not None
    k = build_kernel(eqs, "forward-dynamics")
    ranges = dict(zip(k.input_symbols, k.input_ranges))
    qd_max = [max(abs(float(x)) for x in ranges[s]) for s in eqs.qd]
    bound = bias_energy_bound(tree, qd_max, factors)
    M, Q = tree_forms(eqs, tree)
    syms = list(eqs.q) + list(eqs.qd)
    X = np.random.default_rng(8).uniform(*np.array([ranges[s] for s in syms]).T, (states, len(syms)))
    cells = sorted(M.entries)
    Mv = Evaluator([M.entries[c] for c in cells], syms)(X)
    Ms = np.zeros((len(X), len(eqs.q), len(eqs.q)))
    for e, (i, j) in enumerate(cells):
        Ms[:, i, j] = Mv[:, e]
    b = Evaluator(Q, syms)(X)  # b = Q = -RNEA(q, qd, 0) (no force elements)
    return np.sqrt(np.einsum("ni,ni->n", b, np.linalg.solve(Ms, b[:, :, None])[:, :, 0])).max(), bound


@pytest.mark.parametrize("example", ["sample_arm", "spatial_chain", "chain", "chain:5"])
def test_the_bias_forces_energy_bound_holds_at_random_states(example):
    """kernels.recursive.bias_energy_bound: sqrt(b^T M^-1 b) of the bias forces (RNEA at zero
    acceleration, gravity included) is at most the bound over the declared rates, at 20,000
    random states (M by CRBA; the chains' rods have no inertia about their own axes: their
    bound is taken in the plane's twists). Measured: bound / largest 5.7 (sample_arm), 5.5
    (spatial_chain), 1.8 (chain), 2.5 (chain:5)."""
    name, _, n = example.partition(":")
    largest, bound = _energy_check((load(name, n=int(n)) if n else load(name)).equations())
    assert largest <= bound and largest > bound / 20, (largest, bound)
    print(example, "bound / largest:", bound / largest)


@pytest.mark.needs(dists=("example-robot-data",))
def test_the_bias_forces_energy_bound_holds_with_slides():
    """The same for Panda, whose fingers slide (their declared 0 .. 0.04 m and their rates
    enter the link norms: kernels.recursive._link_norms)."""
    from importlib.metadata import distribution
    from mbforge.model import from_urdf
    path = distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf")
    largest, bound = _energy_check(from_urdf(path).equations(), 5000)
    assert largest <= bound and largest > bound / 50, (largest, bound)
    print("panda bound / largest:", bound / largest)


def test_the_mass_matrix_errors_are_read_as_the_bodies_perturbations():
    """ldlback's bodies: CRBA's composite inertias bind to the tape, and reading their errors
    as perturbations of the bodies (each measured in its own inertia) instead of M's
    entries' errors against M's eigenvalue floor tightens sample_arm's float32 forward
    dynamics bound (measured: 1.79e4 -> 4.6e3 rad/s^2; M's share of eta 0.09 -> 0.004)."""
    from mbforge.analysis.floaterror import float32_bounds
    from mbforge.analysis.ranges import analyse_domain
    k = build_kernel(load("sample_arm").equations(), "forward-dynamics")
    tape = k.tape()
    bw = tape.hints.backward
    assert bw.bodies is not None and any(t is not None for _, _, IC, _ in bw.bodies for row in IC for t in row)
    hull = analyse_domain(tape, [k.input_ranges])
    with_bodies = float32_bounds(tape, hull)
    bw.bodies = None
    without = float32_bounds(tape, hull)
    assert max(with_bodies) < max(without) / 3, (with_bodies, without)
