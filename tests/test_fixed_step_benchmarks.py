"""issue 27 item 4: fixed-point step kernels of the benchmark problems whose Schur-complement
solve cannot be proved in fixed point: the flyball governor (psi and the arms' angle, 1,024
cells) and Andrews' squeezer (a millimetre mechanism at up to 1.5e3 rad/s, 512 cells), each
with `--set envelope=True`, `--integrator rk4 --penalty 0 --solve kkt` (the exact
multipliers through one fixed-pivot factor of [M A^T; A 0] a stage, kernels.step). At 2,000
consistent states of each envelope the c-fixed step stays within its per-step bound of the
c-double step fed the same rounded state, and over a short horizon from the model's initial
state it follows the c-double step (the device figures over the whole horizon:
docs/device-simulation.md)."""
import numpy as np
import pytest

from helpers.steps import assert_within_bound, run_steps
from mbforge.domain.cover import envelope_cover
from mbforge.examples import load_model
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate
from mbforge.verify.hostlib import load_kernel

pytestmark = [pytest.mark.host, pytest.mark.slow]

# model -> (dt, per-step bounds: positions, rates; horizon [s], tolerance of q against the double step)
CASES = {"governor": (2e-3, 1e-6, 2e-4, 0.2, 1e-5),
         "andrews": (2e-5, 5e-5, 5.0, 2e-3, 1e-3)}


def _states(eqs, count: int, seed: int) -> np.ndarray:
    """Consistent (q, qd) of the envelope's cover, as rows."""
    S = envelope_cover(eqs).sample(count, seed)
    return np.column_stack([S[s] for s in list(eqs.q) + list(eqs.qd)])


@pytest.mark.parametrize("model", sorted(CASES))
def test_fixed_point_kkt_step_holds_its_bound_over_the_envelope(tmp_path, monkeypatch, model):
    dt, qb, vb, horizon, tol = CASES[model]
    monkeypatch.setenv("MBFORGE_JOBS", "1")  # one process: no local cluster to start for a minute's analysis
    eqs = load_model(model, options={"envelope": True}).equations()
    # the kernel built once for both targets (what `mbforge generate ... --kernel step --set envelope=True
    # --integrator rk4 --penalty 0 --solve kkt` builds)
    k = build_kernel(eqs, "step", dt=dt, integrator="rk4", penalty=0.0, solve="kkt")
    fx, db = tmp_path / "fx", tmp_path / "db"
    generate(k, "c-fixed").write(fx)
    generate(k, "c-double").write(db)
    kf, kd = load_kernel(fx), load_kernel(db)
    m = kf.manifest
    n = len(eqs.q)
    bound = np.concatenate([np.asarray(g.error_bound) for g in m.outputs])
    assert (bound[:n] < qb).all() and (bound[n:2 * n] < vb).all(), bound
    assert_within_bound(fx, kf, kd, _states(eqs, 2_000, 3), 1_500)
    t, qf = run_steps(fx, model, ["envelope=True"], t_end=horizon, every_s=10 * dt)
    _, qd = run_steps(db, model, ["envelope=True"], t_end=horizon, every_s=10 * dt)
    assert np.abs(qf - qd).max() < tol, np.abs(qf - qd).max()
