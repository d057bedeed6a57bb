"""analysis.ldlback: the c-fixed forward dynamics of an unconstrained open tree (M factored
LDL^T leaves first) gets its error bound from a backward-error argument (the computed
factors are exact for M + Delta, ||Delta|| below M's eigenvalue floor) instead of op-by-op
propagation through the elimination, which refused sample_arm (a pivot's error 26 against
its floor 0.02). Checked on the compiled kernel against the compiled c-double one at 5,000
random states of the declared box; the bound holds but is far from tight (see the test)."""
import numpy as np
import pytest

from mbforge.examples import load
from mbforge.kernels.builders import build_kernel


@pytest.mark.host
def test_sample_arm_fixed_forward_dynamics_holds_its_bound_at_random_states(tmp_path):
    """Status 0 and every qdd within its manifest bound of c-double's at 5,000 states
    uniform over the box (angles over a period, +-10 rad/s, +-1 N m). Measured (M by CRBA,
    Q by RNEA with its vectors' norm bounds, lambda floored at 0.0033 with weighted joints:
    tests/test_tree_dynamics.py): errors 0.07 .. 1.2 rad/s^2 (|qdd| up to 2,100: M^-1 is
    only bounded by 1/lambda = 300 and the bias forces' enclosure is still about ten times
    their largest value), bound 1.8e4, bound / measured 1.5e4 .. 2.7e5: sound, not useful
    (from the Lagrangian M and Q: errors 0.5 .. 34, bound 2.2e6)."""
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    k = build_kernel(load("sample_arm").equations(), "forward-dynamics")
    generate(k, "c-fixed").write(tmp_path / "fx")
    generate(k, "c-double").write(tmp_path / "db")
    m, md = Manifest.load(tmp_path / "fx"), Manifest.load(tmp_path / "db")
    lo, hi = np.array(k.input_ranges).T
    X = np.random.default_rng(5).uniform(lo, hi, (5000, len(lo)))
    Yf, sf = hostlib.load_kernel(tmp_path / "fx")(to_raw(m, X, "inputs"))
    bound = np.array([b for g in m.outputs for b in g.error_bound])
    assert (sf == 0).all() and np.isfinite(bound).all()
    # against double at the int32 inputs the kernel reads, and at the real ones (the bound
    # covers the inputs' rounding too)
    for Xd in (from_raw(m, to_raw(m, X, "inputs"), "inputs"), X):
        Yd, sd = hostlib.load_kernel(tmp_path / "db")(to_raw(md, Xd, "inputs"))
        assert (sd == 0).all()
        err = np.abs(from_raw(m, Yf, "outputs") - from_raw(md, Yd, "outputs")).max(0)
        assert (err <= bound).all() and err.max() > 0, (err, bound)
        print("bound / measured:", bound / err)


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
