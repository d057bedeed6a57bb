"""Operating envelopes and their verified covers (domain.cover, analysis.intervals): the
cover holds every consistent state of the envelope (checked against states computed
independently, in closed form or by the reference solver, densely), a mechanism that
cannot serve its envelope is refused with the configuration named, and the envelope is
declared, overridden and recorded as a user expects."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from mbforge.analysis.intervals import IntervalEvaluator
from mbforge.domain import DomainError
from mbforge.domain.cover import envelope_cover, time_cover
from mbforge.examples import fourbar, slidercrank
from mbforge.ir import cos, sin, sqrt, symbol
from mbforge.kernels.builders import build_kernel
from mbforge.model import Model, ModelError
from mbforge.reference.solvers import Kinematics


def _inside(cover, syms, X) -> np.ndarray:
    """For each row of X (values of syms), whether some cell's box holds it."""
    b = cover.bounds()
    L = np.column_stack([b[s][0] for s in syms])
    H = np.column_stack([b[s][1] for s in syms])
    ok = np.zeros(len(X), dtype=bool)
    for k in range(len(L)):
        ok |= np.all((X >= L[k]) & (X <= H[k]), axis=1)
    return ok


def test_interval_evaluation_encloses_dense_points():
    x, y = symbol("cov_x"), symbol("cov_y")
    exprs = [sin(x) * cos(y), x / (y * y + 0.5), sqrt(x * x + y), (x - y) ** 3, -x * x]
    ev = IntervalEvaluator(exprs, [x, y])
    rng = np.random.default_rng(3)
    lo = np.column_stack([rng.uniform(-4, 4, 200), rng.uniform(0.1, 3, 200)])
    hi = lo + rng.uniform(0, 2, (200, 2))
    L, H = ev(lo, hi)
    from mbforge.ir import Evaluator
    pt = Evaluator(exprs, [x, y])
    for _ in range(20):
        P = lo + (hi - lo) * rng.random(lo.shape)
        Y = pt(P)
        assert np.all((Y >= L) & (Y <= H))
    # a divisor whose interval holds 0: unbounded, not an error
    L, H = IntervalEvaluator([1.0 / x], [x])(np.array([[-1.0]]), np.array([[1.0]]))
    assert L[0, 0] == -np.inf and H[0, 0] == np.inf


def test_slidercrank_cover_holds_closed_form_states():
    """Full crank turn at 5..60 rpm: positions and velocities in closed form at 20,001
    crank angles, each at the extreme and a random speed, lie in the cover."""
    eqs = slidercrank.build().equations()
    cover = envelope_cover(eqs)
    th = np.linspace(0.0, 2 * math.pi, 20001)
    rng = np.random.default_rng(0)
    for w in (np.full_like(th, 0.5), np.full_like(th, 2 * math.pi), rng.uniform(0.5, 2 * math.pi, th.size)):
        s2 = -np.sin(th) / 2
        th2 = np.arcsin(s2)
        th2d = -np.cos(th) * w / (2 * np.cos(th2))
        Z = np.zeros_like(th)
        q = [Z, Z, Z, Z, Z, th, np.cos(th), np.sin(th), th2, np.cos(th) + 2 * np.cos(th2), Z, Z]
        qd = [Z, Z, Z, Z, Z, w, -np.sin(th) * w, np.cos(th) * w, th2d,
              -np.sin(th) * w - 2 * np.sin(th2) * th2d, Z, Z]
        X = np.column_stack(q + qd)
        assert _inside(cover, list(eqs.q) + list(eqs.qd), X).all()


def test_fourbar_cover_holds_the_driven_motion_densely():
    """The four-bar's envelope (crank angle through an equation, not a coordinate) holds
    its driven motion (10 rpm) at 20,001 times, positions to accelerations; the verified
    time cover of the kinematics kernel holds it too."""
    eqs = fourbar.build().equations()
    lo, hi = eqs.ranges[eqs.t]
    T = np.linspace(lo, hi, 20001)
    Q, QD, QDD = Kinematics(eqs).motion(T)
    cover = envelope_cover(eqs)
    syms = list(eqs.q) + list(eqs.qd) + list(eqs.qdd)
    assert _inside(cover, syms, np.column_stack([Q, QD, QDD])).all()
    tc = time_cover(eqs, 96)
    assert _inside(tc, list(eqs.q) + [eqs.t], np.column_stack([Q, T])).all()


def test_cover_samples_are_consistent_and_inside():
    eqs = fourbar.build(inertia=True).equations()
    cover = envelope_cover(eqs)
    S = cover.sample(5000, seed=4)
    syms = list(eqs.q) + list(eqs.qd) + list(eqs.qdd)
    X = np.column_stack([S[s] for s in syms])
    assert len(X) == 5000
    assert _inside(cover, syms, X).all()
    from mbforge.ir import Evaluator
    res = Evaluator([eqs.phi[i] for i in eqs.kinematic_rows], list(eqs.q))(X[:, :4])
    assert np.abs(res).max() < 1e-9
    # velocities satisfy Phi_q qd = 0 on the kinematic rows
    J = Evaluator(eqs.phi_kin_q.values(), list(eqs.q))(X[:, :4])
    v = np.zeros((len(X), len(eqs.kinematic_rows)))
    for k, (i, j) in enumerate(eqs.phi_kin_q.pattern):
        v[:, i] += J[:, k] * X[:, 4 + j]
    assert np.abs(v).max() < 1e-9


def test_forward_dynamics_domain_is_the_cover_and_vectors_are_consistent():
    eqs = slidercrank.build().equations()
    k = build_kernel(eqs, "forward-dynamics")
    assert k.envelope["boxes"] == len(k.domain) >= 32
    assert k.envelope["inputs"] == {"crank_torque": [-60.0, 60.0]}
    V = np.array(k.motion)
    D = np.array(k.domain)
    inside = np.zeros(len(V), dtype=bool)
    for box in D:
        inside |= np.all((V >= box[:, 0]) & (V <= box[:, 1]), axis=1)
    assert inside.all()
    # the vectors sweep the envelope: the crank angle over most of the turn, speeds too
    th1 = V[:, 5]
    assert th1.min() < 0.5 and th1.max() > 2 * math.pi - 0.5


def test_a_kernel_takes_its_domain_as_a_value():
    """The domain stage gives a frozen Domain, and the kernel built with it is a new one:
    the kernel it came from keeps its declared ranges and no domain (apply_cover used to
    set them in place); the builder's own kernel is exactly the bare one with its Domain."""
    from mbforge.domain.cover import envelope_domain
    from mbforge.kernels import InPort
    from mbforge.kernels.common import constraint_rows
    from mbforge.kernels.dynamics import forward_dynamics_kernel

    eqs = slidercrank.build().equations()
    k = forward_dynamics_kernel(eqs)  # before build_kernel drops t
    bare = k.replace(domain=None, motion=None, envelope=None,
                     inputs=[InPort(p.name, p.symbols, p.declared or p.ranges) for p in k.inputs])
    d = envelope_domain(eqs, bare.inputs, envelope_cover(eqs, rows=constraint_rows(eqs, kinematic_only=True)[3]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.boxes = None
    built = bare.with_domain(d)
    assert bare.domain is None and bare.motion is None and bare.envelope is None
    assert all(p.declared is None for p in bare.inputs)
    assert (built.domain, built.motion, built.envelope) == (k.domain, k.motion, k.envelope)
    assert [(p.ranges, p.declared) for p in built.inputs] == [(p.ranges, p.declared) for p in k.inputs]
    assert built.inputs[0].ranges != bare.inputs[0].ranges  # the cover's hull, not the declared box


def _nongrashof_fourbar() -> Model:
    """Crank 1, coupler 1.2, rocker 1.3, ground 3: the crank cannot turn fully."""
    from mbforge.model.natural import NaturalBody2D
    m = Model("stuck4")
    xB = m.coordinate("xB", guess=1.0, range=(-1.2, 1.2))
    yB = m.coordinate("yB", guess=0.0, range=(-1.2, 1.2))
    xC = m.coordinate("xC", guess=2.0, range=(-3, 5))
    yC = m.coordinate("yC", guess=0.6, range=(-3, 3))
    NaturalBody2D(m, "crank", (0.0, 0.0), (xB, yB), length=1.0, constraint_name="bar_AB")
    NaturalBody2D(m, "coupler", (xB, yB), (xC, yC), length=1.2, constraint_name="bar_BC")
    NaturalBody2D(m, "rocker", (3.0, 0.0), (xC, yC), length=1.3, constraint_name="bar_CD")
    m.operate("crank", range=(-math.pi, math.pi), rate=(-1, 1), accel=(-1, 1), cells=16,
              equation=lambda th: xB * sin(th) - yB * cos(th))
    return m


def test_envelope_the_mechanism_cannot_serve_is_refused_naming_where():
    m = _nongrashof_fourbar()
    # the guess must assemble: put C where the loop closes with B = (1, 0)
    with pytest.raises(DomainError) as e:
        envelope_cover(m.equations())
    msg = str(e.value)
    assert "stuck4" in msg and "crank=" in msg
    assert "singular configuration" in msg or "does not assemble" in msg


def test_operate_errors_name_the_problem():
    m = Model("e1")
    q = m.coordinate("q", range=(-1, 1))
    with pytest.raises(ModelError, match="empty|lo"):
        m.operate(q, range=(1.0, 0.0))
    with pytest.raises(ModelError, match="needs equation"):
        m.operate("angle", range=(0, 1))
    m.operate(q, range=(-0.5, 0.5))
    with pytest.raises(ModelError, match="declared twice"):
        m.operate(q, range=(-0.5, 0.5))
    with pytest.raises(ModelError, match="no actuator 'motor'"):
        m.operate_input("motor", (-1, 1))


def _mbforge(*args):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_envelope_override_from_the_command_line(tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"quantities": {"th1": {"range": [0.0, 3.2], "cells": 8}},
                               "inputs": {"crank_torque": [-10, 10]}}))
    out = tmp_path / "k"
    r = _mbforge("generate", "slidercrank", "--kernel", "forward-dynamics", "--target", "c-float32",
                 "--envelope", env, "--out", out)
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["envelope"]["source"] == "env.json"
    assert m["envelope"]["quantities"]["th1"]["range"] == [0.0, 3.2]
    assert m["envelope"]["inputs"] == {"crank_torque": [-10.0, 10.0]}
    assert m["envelope"]["boxes"] >= 8
    bad = {"nope.json": None, "bad.json": "{", "key.json": json.dumps({"quantities": {"th9": {}}}),
           "rng.json": json.dumps({"quantities": {"th1": {"range": [2, 1]}}}),
           "inp.json": json.dumps({"inputs": {"motor": [0, 1]}})}
    for name, text in bad.items():
        f = tmp_path / name
        if text is not None:
            f.write_text(text)
        r = _mbforge("generate", "slidercrank", "--kernel", "forward-dynamics", "--envelope", f,
                     "--out", tmp_path / ("o" + name))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert name in lines[0]
        assert not (tmp_path / ("o" + name)).exists()


def test_cells_too_wide_for_the_test_are_not_called_singular(monkeypatch):
    """A cell that fails only because it is wide (here the four-bar's whole crank turn in
    one cell, one halving allowed) is refused as not verified, with the cure: more cells;
    the word singular is kept for cells where the mechanism does not assemble or its
    Jacobian is singular (test_envelope_the_mechanism_cannot_serve_is_refused_naming_where)."""
    from mbforge.examples import load
    from mbforge.domain import krawczyk as K

    monkeypatch.setattr(K, "MAX_DEPTH", 1)
    eqs = load("fourbar").equations()
    eqs.envelope = eqs.envelope.override({"quantities": {"crank": {"cells": 1}}}, "test", list(eqs.actuator_names))
    with pytest.raises(DomainError, match=r"^fourbar: the cover of the operating envelope is not verified near "
                                          r"crank=.* after 1 halvings of its cell, though .* regular constraint "
                                          r"Jacobian .*declare more cells") as e:
        envelope_cover(eqs)
    assert "singular configuration" not in str(e.value) and "\n" not in str(e.value)


def _delta_cylinder_states(n, seed):
    """Consistent delta states with the platform uniform in the cylinder x^2 + y^2 <= 0.3^2,
    z in [-0.9, -0.6], from test_delta's closed forms (rejection sampling, not mbforge's)."""
    from test_delta import states_at

    rng = np.random.default_rng(seed)
    P = np.column_stack([rng.uniform(-0.3, 0.3, 4 * n), rng.uniform(-0.3, 0.3, 4 * n), rng.uniform(-0.9, -0.6, 4 * n)])
    P = P[P[:, 0] ** 2 + P[:, 1] ** 2 <= 0.09][:n]
    return states_at(P, rng)


def test_a_cylinder_region_leaves_out_the_cells_outside_and_holds_every_state_inside():
    """The delta's cylinder workspace (Model.operate_region): of the 8 x 8 cells over x, y
    the 4 corner ones lie wholly outside r = 0.3 (their nearest point is at r = 0.318) and
    are left out; every consistent state in the cylinder (2,000 drawn independently, the
    rim included) lies in a cell; the cover's own samples stay inside it."""
    from mbforge.examples import delta

    eqs = delta.build(workspace="cylinder").equations()
    cover = envelope_cover(eqs)
    edges = np.linspace(-0.3, 0.3, 9)
    near = [min(abs(a), abs(b)) if a * b > 0 else 0.0 for a, b in zip(edges[:-1], edges[1:])]
    outside = sum(1 for x in near for y in near if x * x + y * y > 0.09)
    assert outside == 4 and len(cover) == 64 - outside
    S = _delta_cylinder_states(2000, seed=5)
    rim = _delta_cylinder_states(400, seed=6)  # pushed out onto the rim r = 0.3
    r = np.hypot(rim["P_x"], rim["P_y"])
    rim["P_x"], rim["P_y"] = rim["P_x"] * 0.3 / r, rim["P_y"] * 0.3 / r
    from test_delta import states_at
    rim = states_at(np.column_stack([rim["P_x"], rim["P_y"], rim["P_z"]]), np.random.default_rng(7))
    by_name = {s.value.name: s for s in cover.symbols}
    names = [n for n in S if n in by_name]
    assert len(names) == 36  # P and the three elbows: positions, rates, accelerations
    for states in (S, rim):
        X = np.column_stack([states[n] for n in names])
        assert _inside(cover, [by_name[n] for n in names], X).all()
    own = cover.sample(3000, seed=2)
    x, y = own[by_name["P_x"]], own[by_name["P_y"]]
    assert len(x) == 3000 and (x * x + y * y).max() <= 0.09


@pytest.mark.parametrize("expr, message", [
    (lambda P: P[0] ** 2 + P[1] ** 2 + 1.0, "the operating region r excludes every state of the quantities' ranges"),
    (lambda P: P[0] - 10.0 + 0 * P[1], None),  # every state inside: accepted
    (lambda P: P[0] ** 2 - 0.01 + 1e-3 * symbol("stray"), "operate_region(r): the expression may use only the operating"),
    (lambda P: 1.0, "operate_region(r): the expression uses no operating quantity"),
])
def test_a_bad_region_is_one_line(expr, message):
    from mbforge.examples import delta

    m = delta.build(workspace="full")
    P = [q for q in m.q if q.value.name in ("P_x", "P_y", "P_z")]
    try:
        m.operate_region("r", expr(P))
        envelope_cover(m.equations())
    except (ModelError, DomainError) as e:
        assert message is not None and message in str(e) and "\n" not in str(e), str(e)
    else:
        assert message is None
    if message is None:
        with pytest.raises(ModelError, match=r"operate_region\('r'\) is declared twice"):
            m.operate_region("r", P[0])


def test_the_manifest_records_the_region():
    from mbforge.examples import delta
    from mbforge.domain.cover import envelope_record

    eqs = delta.build(workspace="cylinder").equations()
    rec = envelope_record(eqs)
    assert rec["regions"] == {"cylinder": "-0.09 + env_P_x**2 + env_P_y**2 <= 0"}
    assert "regions" not in envelope_record(delta.build(workspace="full").equations())


def test_an_envelope_file_may_repeat_the_models_regions_but_not_change_them():
    """The manifest's envelope fed back as --envelope round-trips; a region is the model's."""
    from mbforge.examples import delta

    env = delta.build(workspace="cylinder").envelope
    data = env.to_json()
    assert env.override(data, "m.json", ["motor1", "motor2", "motor3"]).regions == env.regions
    data["regions"] = {"cylinder": "env_P_x**2 - 0.01 <= 0"}
    with pytest.raises(ModelError, match=r"^m.json: regions: a region is an expression of the model"):
        env.override(data, "m.json", ["motor1", "motor2", "motor3"])


def test_a_search_from_one_draw_is_the_search_from_its_own_draw():
    """domain.cover.search_states: the states it ends on are consistent states of the
    envelope that score at least as high as where they started; started from a draw made
    once (drawn_states, as bench/stewart_envelope.py's per-output searches are), it is the
    search that draws for itself with the same count and seed."""
    from mbforge.domain.cover import drawn_rows, drawn_states, search_states
    from mbforge.examples import load

    eqs = load("nfourbar", n=1, swing=0.5).equations()
    kernel = build_kernel(eqs, "equations")
    cover = envelope_cover(eqs)
    col = [s.value.name for p in kernel.inputs for s in p.symbols].index("x0_d")

    def score(X):
        return X[:, col]  # the crank end's speed along x: the search climbs towards the rate limit

    best, X, first = search_states(eqs, kernel.inputs, cover, score, 200, start=4, seed=5)
    drawn = drawn_states(eqs, kernel.inputs, cover, 200, 5)
    assert len(drawn_rows(drawn)) == 200
    again = search_states(eqs, kernel.inputs, cover, score, 0, start=4, drawn=drawn)
    assert np.array_equal(best, again[0]) and np.array_equal(X, again[1])
    assert (best >= first).all() and best.max() > first.max()
    assert _inside(cover, list(eqs.q) + list(eqs.qd), X[:, :8]).all()


def test_a_motion_points_round_off_keeps_it_in_the_domain():
    """domain.motion.motion_in_domain: a point whose coordinate the box pins at [0, 0] comes
    out of a closed form as -2e-32 (the Stewart platform's motions): kept, moved onto the box;
    a point truly outside is dropped. The Stewart's equations kernel ships its motion."""
    from mbforge.domain.motion import MOTION_POINTS, motion_in_domain
    from mbforge.examples import load

    boxes = [[(0.0, 0.0), (-1.0, 1.0)], [(2.0, 3.0), (-1.0, 1.0)]]
    kept = motion_in_domain(boxes, [[-2e-32, 0.5], [1e-3, 0.5], [2.5, 1.0 + 1e-14], [2.5, 0.0]])
    assert kept == [[0.0, 0.5], [2.5, 1.0], [2.5, 0.0]]
    assert motion_in_domain(boxes, [[5.0, 0.0]]) is None
    k = build_kernel(load("stewart").equations(), "equations")
    assert len(k.motion) == MOTION_POINTS  # every point of the motion, none dropped
