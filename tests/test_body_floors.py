"""analysis.bodyfloors: the forward-dynamics kernel of an unconstrained open tree factors M
leaves first, its pivots floored by the joints' own bodies (and their children's rotation
across the axis), capped by the subtrees' composite inertias, and M's smallest eigenvalue
floored by the bodies' inertias. Checked against M evaluated at 3,000 random
configurations of sample_arm and spatial_chain: every floor below, every cap above."""
import numpy as np
import pytest

from mbforge.analysis.bodyfloors import diagonal_ceilings, eigen_floor, link_floor
from mbforge.examples import load
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.recursive import open_tree


@pytest.mark.parametrize("name", ["sample_arm", "spatial_chain", "chain:5"])
def test_floors_and_caps_hold_at_random_configurations(name):
    """(chain:5: a planar chain of rods, its eigenvalue floor from their inertia about the
    common axis: bodyfloors._planar.)"""
    base, _, n = name.partition(":")
    eqs = (load(base, n=int(n)) if n else load(base)).equations()
    F = build_kernel(eqs, "forward-dynamics").info.solves["KKT"]
    links = open_tree(eqs.source).links
    by_j = {L.j: L for L in links}
    assert F.order == [L.j for L in reversed(links)]  # leaves first
    floor = np.array([link_floor(by_j[j]) for j in F.order])
    top = diagonal_ceilings(links)
    cap = np.array([top[j] for j in F.order])
    lam = eigen_floor(links)
    assert (floor > 0).all() and lam > 0
    rng = np.random.default_rng(7)
    Q = rng.uniform(-np.pi, np.pi, (3000, len(eqs.q)))
    piv = Evaluator(F.pivots, list(eqs.q))(Q)
    assert (piv >= floor).all(), (piv.min(0), floor)
    assert (piv <= cap).all(), (piv.max(0), cap)
    n = len(eqs.q)
    cells = sorted(eqs.M.entries)
    vals = Evaluator([eqs.M.entries[c] for c in cells], list(eqs.q))(Q[:500])
    M = np.zeros((500, n, n))
    for e, (i, j) in enumerate(cells):
        M[:, i, j] = vals[:, e]
    eig = np.linalg.eigvalsh(M)
    assert eig[:, 0].min() >= lam, (eig[:, 0].min(), lam)
    assert np.diagonal(M, axis1=1, axis2=2).max(0).max() <= max(top.values())
    # not vacuous: the floors reach within a factor 10 of the smallest pivots seen
    assert (piv.min(0) < 10 * floor).any() or name == "spatial_chain"


def test_the_range_analysis_no_longer_sees_a_pivot_reach_0():
    """sample_arm's forward dynamics over its whole declared box: every divisor's enclosure
    stays positive or negative (it spanned [-1e6, 1e6] before)."""
    from mbforge.analysis.ranges import analyse_domain
    k = build_kernel(load("sample_arm").equations(), "forward-dynamics")
    t = k.tape()
    r = analyse_domain(t, [k.input_ranges], strict=True)
    for ins in t.instrs:
        if ins.op == "div":
            assert not r.of(ins.args[1]).contains_zero()
    assert all(np.isfinite(r.of(o).mag) for o in t.outputs)


@pytest.mark.parametrize("name", ["sample_arm", "spatial_chain"])
@pytest.mark.parametrize("kernel", ["forward-dynamics", "forward-dynamics-aba"])
def test_every_hint_holds_at_random_states(name, kernel):
    """Each constant enclosure the kernel hands range analysis (pivots, reciprocals,
    multipliers, Schur entries, articulated inertias, U and U / D) holds at 2,000 random
    states of the declared box, and each |value| <= factor |b| of the solve as well."""
    k = build_kernel(load(name).equations(), kernel)
    (enc,) = k.info.enclosures
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(3).uniform(lo, hi, (2000, len(lo)))
    atoms = [a for a, _, _ in enc.atoms]
    V = Evaluator(atoms, k.input_symbols)(X)
    low = np.array([l for _, l, _ in enc.atoms])
    high = np.array([h for _, _, h in enc.atoms])
    assert (V >= low).all() and (V <= high).all()
    assert len(atoms) > 10 * len(k.inputs[0].symbols)  # more than the pivots alone
    if enc.scaled:
        B = Evaluator(list(enc.rhs), k.input_symbols)(X)
        norm = np.sqrt((B ** 2).sum(1))
        S = Evaluator([a for a, _ in enc.scaled], k.input_symbols)(X)
        assert (np.abs(S) <= np.array([f for _, f in enc.scaled]) * norm[:, None]).all()


def test_a_refusal_is_one_line_when_the_backward_bound_fails(tmp_path):
    """c-fixed forward dynamics (M, LDL^T) of a 10-link spatial_chain is refused: M's
    smallest eigenvalue is floored at only 2.56e-5, and the roundings with M's own errors
    perturb M by more (analysis.ldlback). One line naming that floor, no traceback, nothing
    written. (The 6-link chain and sample_arm generate: tests/test_ldl_backward.py.)"""
    import subprocess
    from helpers.builds import MBFORGE
    r = subprocess.run([MBFORGE, "generate", "spatial_chain", "--set", "n=10", "--kernel", "forward-dynamics",
                        "--target", "c-fixed", "--out", str(tmp_path / "k")], capture_output=True, text=True)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and not (tmp_path / "k").exists()
    # the physical cause: the links' least principal inertia (1e-4 kg m^2 each) bounds the floor
    assert ("the floor of its smallest eigenvalue (2.56e-05, at most every body's least principal inertia "
            "about its centre of mass, 0.0001 kg m^2)") in lines[0] and "no bound" in lines[0]


@pytest.mark.host
def test_fixed_point_aba_of_sample_arm_holds_its_bounds_at_random_states(tmp_path):
    """c-fixed forward-dynamics-aba of sample_arm generates; at 5,000 random states of its
    declared box (all angles over a period, +-10 rad/s, +-1 N m) status 0 and every output
    within its bound of the c-double kernel's. The bounds are far from tight (the box's
    velocity terms are enclosed loosely): measured ratios are asserted only to be >= 1."""
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    k = build_kernel(load("sample_arm").equations(), "forward-dynamics-aba")
    generate(k, "c-fixed").write(tmp_path / "fx")
    generate(k, "c-double").write(tmp_path / "db")
    m, md = Manifest.load(tmp_path / "fx"), Manifest.load(tmp_path / "db")
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(5).uniform(lo, hi, (5000, len(lo)))
    X = from_raw(m, to_raw(m, X, "inputs"), "inputs")  # both kernels read the same rounded inputs
    Yf, sf = hostlib.load_kernel(tmp_path / "fx")(to_raw(m, X, "inputs"))
    Yd, sd = hostlib.load_kernel(tmp_path / "db")(to_raw(md, X, "inputs"))
    assert (sf == 0).all() and (sd == 0).all()
    err = np.abs(from_raw(m, Yf, "outputs") - from_raw(md, Yd, "outputs")).max(0)
    bound = np.array([b for g in m.outputs for b in g.error_bound])
    assert np.isfinite(bound).all() and (err <= bound).all(), (err, bound)
    assert err.max() > 0
    print("bound / measured:", bound / err)


@pytest.mark.needs(dists=("example-robot-data",))
def test_a_tree_with_slides_gets_floors_and_caps_over_its_ranges():
    """Panda's fingers slide (prismatic, 0 .. 0.04 m): the caps take each slide's declared
    range as its reach (Link.slide) and M's eigenvalue floor charges each slide's rate to
    its body's and its parent's centre-of-mass velocities (eigen_floor_mixed). At 3,000
    configurations within the declared ranges every pivot is within [floor, cap], every
    diagonal entry within its cap and M's smallest eigenvalue above the floor; c-fixed
    forward dynamics generates (it was refused: no cap above the fingers)."""
    from importlib.metadata import distribution
    from mbforge.model import from_urdf
    path = distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf")
    model = from_urdf(path)
    eqs = model.equations()
    links = open_tree(model).links
    assert any(not L.joint.revolute for L in links) and all(np.isfinite(L.slide) for L in links)
    k = build_kernel(eqs, "forward-dynamics")
    F = k.info.solves["KKT"]
    by_j = {L.j: L for L in links}
    floor = np.array([link_floor(by_j[j]) for j in F.order])
    top = diagonal_ceilings(links)
    cap = np.array([top[j] for j in F.order])
    limit: list = []
    lam = eigen_floor(links, limit)
    assert (floor > 0).all() and np.isfinite(cap).all() and lam > 0
    # a refusal names the bodies whose charge sets the floor (here panda_joint3's inertia)
    (bodies, value, what, unit), = limit
    assert bodies and lam <= value and (unit, what) in (("kg m^2", "least principal inertia about its centre of mass"),
                                                        ("kg", "mass"))
    lo, hi = np.array([model.ranges[q] for q in eqs.q]).T
    Q = np.random.default_rng(11).uniform(lo, hi, (3000, len(lo)))
    piv = Evaluator(F.pivots, list(eqs.q))(Q)
    assert (piv >= floor).all() and (piv <= cap).all(), (piv.min(0), floor, piv.max(0), cap)
    n, cells = len(eqs.q), sorted(eqs.M.entries)
    vals = Evaluator([eqs.M.entries[c] for c in cells], list(eqs.q))(Q[:1000])
    M = np.zeros((1000, n, n))
    for e, (i, j) in enumerate(cells):
        M[:, i, j] = vals[:, e]
    assert np.linalg.eigvalsh(M)[:, 0].min() >= lam
    assert (np.diagonal(M, axis1=1, axis2=2) <= np.array([top[j] for j in range(n)])).all()
    (enc,) = k.info.enclosures  # every constant hint holds at random states of the box
    X = np.random.default_rng(3).uniform(*np.array(k.input_ranges).T, (2000, len(k.input_ranges)))
    V = Evaluator([a for a, _, _ in enc.atoms], k.input_symbols)(X)
    assert (V >= np.array([l for _, l, _ in enc.atoms])).all() and (V <= np.array([h for _, _, h in enc.atoms])).all()


@pytest.mark.host
@pytest.mark.needs(dists=("example-robot-data",))
@pytest.mark.parametrize("kernel, target", [("forward-dynamics-aba", "c-fixed"), ("forward-dynamics-aba", "c-float32"),
                                            ("forward-dynamics", "c-float32")])
def test_panda_dynamics_hold_their_bounds(tmp_path, kernel, target):
    """Panda's c-fixed forward-dynamics-aba (refused until its slides had ceilings and its
    articulated inertias a backward bound whose reciprocals, multipliers and products take
    formats from their computed values' caps, analysis.ababack), its float32 one (no bound
    until a body's perturbation was measured in its own inertia) and its float32 forward
    dynamics (no bound until CRBA's composite inertias were read as the bodies'
    perturbations, ldlback's bodies): status 0 and every output within its bound of
    c-double's at 5,000 states of the declared box. The bounds are useless (the ABA's 1e13
    to 1e23 times the errors: its bias and acceleration passes are op by op; the forward
    dynamics' 1.5e5 rad/s^2, about 1e9 times the errors)."""
    bound, err, _ = _compiled_against_double(tmp_path, "panda_description/urdf/panda.urdf", kernel, target, 2)
    assert np.isfinite(bound).all() and (err <= bound).all()


@pytest.mark.host
@pytest.mark.needs(dists=("example-robot-data",))
def test_ur5_forward_dynamics_bound_is_below_its_accelerations(tmp_path):
    """UR5's c-fixed forward dynamics (M by CRBA, LDL^T bounded backward): with
    ||x|| <= sqrt(b^T M^-1 b) / sqrt(lambda) and the bias forces bounded body by body
    (kernels.recursive.bias_energy_bound) instead of ||b|| / lambda, and M's errors read as
    the bodies' perturbations (ldlback's bodies), the bound (247 rad/s^2 before, 0.98 now)
    is below the largest |qdd| of 5,000 states uniform over the URDF's box (about 1e2), and
    holds there (the bound is still 6e4 times the largest error)."""
    bound, err, yd = _compiled_against_double(tmp_path, "ur_description/urdf/ur5_robot.urdf", "forward-dynamics",
                                              "c-fixed", 6)
    assert (err <= bound).all()
    assert bound.max() < np.abs(yd).max() / 10, (bound, np.abs(yd).max(0))


def _compiled_against_double(tmp_path, robot: str, kernel: str, target: str, seed: int):
    """(bounds, largest error per output, the double outputs) of an example-robot-data
    robot's kernel compiled in target against c-double at 5,000 states uniform over its
    box, every call's status 0."""
    from importlib.metadata import distribution
    from mbforge.manifest import Manifest
    from mbforge.model import from_urdf
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    path = distribution("example-robot-data").locate_file(f"cmeel.prefix/share/example-robot-data/robots/{robot}")
    k = build_kernel(from_urdf(path).equations(), kernel)
    generate(k, target).write(tmp_path / "fx")
    generate(k, "c-double").write(tmp_path / "db")
    mf, md = Manifest.load(tmp_path / "fx"), Manifest.load(tmp_path / "db")
    X = np.random.default_rng(seed).uniform(*np.array(k.input_ranges).T, (5000, len(k.input_ranges)))
    Y, sf = hostlib.load_kernel(tmp_path / "fx")(to_raw(mf, X, "inputs"))
    Yd, sd = hostlib.load_kernel(tmp_path / "db")(to_raw(md, from_raw(mf, to_raw(mf, X, "inputs"), "inputs"), "inputs"))
    assert (sf == 0).all() and (sd == 0).all()
    yd = from_raw(md, Yd, "outputs")
    return np.array([b for g in mf.outputs for b in g.error_bound]), np.abs(from_raw(mf, Y, "outputs") - yd).max(0), yd
