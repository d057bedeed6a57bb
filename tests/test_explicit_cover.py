"""Covers of every coordinate from closed forms (domain.explicit_cover): the Stewart
platform's cover over its operating envelope holds consistent states computed
independently (the legs from _stewart.leg_state, asin/atan2 frames, not the model's
closed forms; rates and accelerations by central differences along a path of the
manifold), its boxes bound all 98 coordinates, their rates and accelerations; a closed
form not proven defined over a cell, or a model guard not proven, is refused by name."""
from __future__ import annotations

import time

import numpy as np
import pytest

from mbforge.domain import DomainError
from mbforge.domain import krawczyk as K
from mbforge.domain.cover import envelope_cover
from mbforge.examples import _stewart as S
from mbforge.examples import load
from mbforge.examples import stewart as ST
from mbforge.kernels.builders import build_kernel
from mbforge.model import Model
from mbforge.model.frames import quats_from_matrices

from helpers.models import in_cover

pytestmark = pytest.mark.slow

ENV = ("x", "y", "z", "e1", "e2", "e3")
H = 1e-4  # central-difference step along the path


@pytest.fixture(scope="module")
def stewart():
    eqs = load("stewart", envelope=True).equations()
    t0 = time.perf_counter()
    cover = envelope_cover(eqs)
    print(f"\nstewart explicit cover: {len(cover)} boxes of {len(cover.symbols)} symbols in "
          f"{time.perf_counter() - t0:.2f} s")
    return eqs, cover


def _quat(R):
    """(N, 3, 3) -> (N, 4) with e0 >= 0 (the platform's convention)."""
    e = quats_from_matrices(R)
    return e * np.where(e[:, :1] < 0, -1.0, 1.0)


def _coords(P):
    """The 98 coordinates (order of _stewart.BODIES_98) at platform poses P (N, 7); the
    leg bodies' Euler parameters signed as the model's fixed Shepperd branches (the pivot
    component's sign), computed from rotation matrices, not from the closed forms."""
    c = P[:, :3]
    e = P[:, 3:]
    e0, ev = e[:, 0], e[:, 1:]
    skew = np.zeros((len(P), 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -ev[:, 2], ev[:, 1], -ev[:, 0]
    skew -= skew.transpose(0, 2, 1)
    R = ((2 * e0 ** 2 - 1)[:, None, None] * np.eye(3) + 2 * np.einsum("ni,nj->nij", ev, ev)
         + 2 * e0[:, None, None] * skew)
    cols = {"base": np.tile([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], (len(P), 1)), "plat": P}
    for k, leg in enumerate(S.legs()):
        st = S.leg_state(leg, c, R)
        branch, sign = ST.shepperd_branch(leg.Rc0)
        for body, r, Rb in ((f"cyl{k + 1}", st["rc"], st["Rc"]), (f"pis{k + 1}", st["rp"], st["Rp"])):
            q = quats_from_matrices(Rb)
            q *= np.where(q[:, branch:branch + 1] * sign < 0, -1.0, 1.0)
            cols[body] = np.hstack([r, q])
    return np.hstack([cols[b] for b in S.BODIES_98])


def _states(count, seed):
    """(q, qd, qdd) [N, 98] each: platform poses, rates and accelerations uniform in the
    envelope (e0, its rate and acceleration from the normalisation), the legs' by central
    differences along z(s) = z + s zd + s^2/2 zdd, whose Euler parameters stay unit to
    O(s^3) (normalised: the same first and second derivatives)."""
    env = S.envelope()
    rng = np.random.default_rng(seed)
    Z, ZD, ZDD = (np.zeros((count, 7)) for _ in range(3))
    for j, name in zip((0, 1, 2, 4, 5, 6), ENV):
        for X, r in zip((Z, ZD, ZDD), env[name]):
            X[:, j] = rng.uniform(*r, count)
    ev, evd, evdd = Z[:, 4:], ZD[:, 4:], ZDD[:, 4:]
    Z[:, 3] = np.sqrt(1 - np.sum(ev * ev, axis=1))
    ZD[:, 3] = -np.sum(ev * evd, axis=1) / Z[:, 3]
    ZDD[:, 3] = -(np.sum(ev * evdd, axis=1) + np.sum(ZD[:, 3:] ** 2, axis=1)) / Z[:, 3]

    def at(s):
        P = Z + s * ZD + s * s / 2 * ZDD
        P[:, 3:] /= np.linalg.norm(P[:, 3:], axis=1, keepdims=True)
        return _coords(P)

    Q, Qp, Qm = at(0.0), at(H), at(-H)
    QD, QDD = (Qp - Qm) / (2 * H), (Qp - 2 * Q + Qm) / H ** 2
    QD[:, -7:], QDD[:, -7:] = ZD, ZDD  # the platform's own, exact
    return Q, QD, QDD


def test_cover_holds_independent_consistent_states(stewart):
    eqs, cover = stewart
    assert cover.explicit is not None and len(cover) == np.prod(list(ST.ENV_CELLS.values()))
    Q, QD, QDD = _states(4000, seed=3)
    # the constraints hold at these states (they are consistent, independently of the cover)
    from mbforge.ir import Evaluator
    res = np.atleast_2d(Evaluator([eqs.phi[i] for i in eqs.kinematic_rows], eqs.q)(Q))
    assert np.abs(res).max() < 1e-12
    syms = eqs.q + eqs.qd + eqs.qdd
    cols = [cover.symbols.index(s) for s in syms]
    lo, hi = cover.lo[:, cols], cover.hi[:, cols]
    X = np.hstack([Q, QD, QDD])
    # finite differences: O(H^2) truncation, O(eps / H^2) rounding in the accelerations
    tol = np.concatenate([np.full(98, 1e-13), np.full(98, 1e-6), np.full(98, 1e-5)])
    inside = np.zeros(len(X), dtype=bool)
    for b in range(len(cover)):
        inside |= np.all((X >= lo[b] - tol) & (X <= hi[b] + tol), axis=1)
    assert inside.all(), f"{(~inside).sum()} states outside every box"
    # positions exactly: the legs' coordinates inside the box of the cell holding the pose
    pin = np.zeros(len(X), dtype=bool)
    for b in range(len(cover)):
        pin |= np.all((Q >= lo[b, :98]) & (Q <= hi[b, :98]), axis=1)
    assert pin.all()
    # the boxes are not the whole space: every leg coordinate's box is narrower than 1
    # (positions) in every cell, and the hull's rates stay within 100 of the states' peaks
    assert (hi[:, :98] - lo[:, :98]).max() < 1.0
    print(f"\nwidest boxes: positions {(hi[:, :98] - lo[:, :98]).max():.3g}, velocities "
          f"{(hi[:, 98:196] - lo[:, 98:196]).max():.3g} (states' peak {np.abs(QD).max():.3g}), accelerations "
          f"{(hi[:, 196:] - lo[:, 196:]).max():.3g} (states' peak {np.abs(QDD).max():.3g})")


def test_boxes_bound_every_coordinate_and_kernels_use_them(stewart):
    eqs, cover = stewart
    assert set(eqs.q + eqs.qd + eqs.qdd) <= set(cover.symbols)
    assert np.all(np.isfinite(cover.lo)) and np.all(np.isfinite(cover.hi)) and np.all(cover.lo <= cover.hi)
    k = build_kernel(eqs, "inverse-dynamics")
    D = np.array(k.domain)
    assert D.shape == (len(cover), len(k.input_symbols), 2) and np.all(np.isfinite(D))
    assert k.envelope["boxes"] == len(cover)
    # its verification vectors are consistent states: the constraints hold through all 98
    from mbforge.ir import Evaluator
    M = np.array(k.motion)
    q = M[:, [k.input_symbols.index(s) for s in eqs.q]]
    res = np.atleast_2d(Evaluator([eqs.phi[i] for i in eqs.kinematic_rows], eqs.q)(q))
    assert np.abs(res).max() < 1e-9


def test_cover_is_deterministic(stewart, monkeypatch):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")  # computed again, not read from mbforge.cache
    eqs, cover = stewart
    again = envelope_cover(load("stewart", envelope=True).equations())
    assert [s.value.name for s in again.symbols] == [s.value.name for s in cover.symbols]
    assert np.array_equal(again.lo, cover.lo) and np.array_equal(again.hi, cover.hi)


def test_unproven_guard_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(ST, "SHEPPERD_MIN", 1.5)  # above every pivot (at most 1)
    monkeypatch.setattr(K, "MAX_DEPTH", 1)
    eqs = load("stewart", envelope=True).equations()
    with pytest.raises(DomainError, match=r"^stewart: the Shepperd pivot of cyl1 \(e\d\) is not proven >= 1\.5 "
                                          r"over the cell near plat_x=") as err:
        envelope_cover(eqs)
    assert "\n" not in str(err.value)


def _hyperbola():
    """b = 1 / a on a x b = 1, a operated across 0: the closed form divides by 0 there."""
    m = Model("hyperbola")
    a = m.coordinate("a", guess=0.5, range=(-1, 1))
    b = m.coordinate("b", guess=2.0, range=(-100, 100))
    m.constraint(a * b - 1.0, "hyp")
    m.explicit(b, 1.0 / a)
    return m, a


def test_closed_form_undefined_over_a_cell_is_refused_by_name():
    m, a = _hyperbola()
    m.operate(a, range=(-1.0, 1.0), rate=(-1.0, 1.0), accel=(-1.0, 1.0), cells=4)
    with pytest.raises(DomainError, match=r"^hyperbola: the closed form of b \(position\) divides by a value in "
                                          r"\[.*\] over the cell near a=.*narrow the operating envelope") as err:
        envelope_cover(m.equations())
    assert "\n" not in str(err.value)


def test_closed_form_cover_away_from_the_pole():
    m, a = _hyperbola()
    m.operate(a, range=(0.5, 1.0), rate=(-1.0, 1.0), accel=(-1.0, 1.0), cells=4)
    eqs = m.equations()
    cover = envelope_cover(eqs)
    assert cover.explicit is not None
    rng = np.random.default_rng(0)
    av, ad, add = rng.uniform(0.5, 1.0, 2000), rng.uniform(-1, 1, 2000), rng.uniform(-1, 1, 2000)
    X = np.column_stack([av, 1 / av, ad, -ad / av ** 2, add, 2 * ad ** 2 / av ** 3 - add / av ** 2])
    assert in_cover(cover, X, [eqs.q[0], eqs.q[1], eqs.qd[0], eqs.qd[1], eqs.qdd[0], eqs.qdd[1]]).all()


def test_closed_form_with_an_angle_from_atan2():
    """th = atan2(u, 1) on sin(th) = u cos(th): range analysis encloses atan2 (an interval
    from the argument box's corners), so the cover comes from the closed form, and it
    holds th, its rate and acceleration computed independently (arctan and its chain rule)."""
    from mbforge.ir import atan2, cos, sin

    m = Model("tangent")
    u = m.coordinate("u", guess=1.0, range=(0, 3))
    th = m.coordinate("th", guess=0.8, range=(-2, 2))
    m.constraint(sin(th) - u * cos(th), "tan")
    m.explicit(th, atan2(u, 1.0))
    m.operate(u, range=(0.5, 2.0), rate=(-1.0, 1.0), accel=(-1.0, 1.0), cells=4)
    eqs = m.equations()
    cover = envelope_cover(eqs)
    assert cover.explicit is not None
    rng = np.random.default_rng(0)
    uv, ud, udd = rng.uniform(0.5, 2.0, 4000), rng.uniform(-1, 1, 4000), rng.uniform(-1, 1, 4000)
    s = 1 + uv * uv
    X = np.column_stack([uv, np.arctan(uv), ud, ud / s, udd, (udd * s - 2 * uv * ud * ud) / s ** 2])
    assert in_cover(cover, X, [eqs.q[0], eqs.q[1], eqs.qd[0], eqs.qd[1], eqs.qdd[0], eqs.qdd[1]]).all()
