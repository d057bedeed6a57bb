"""Status codes that mean what they say: every C target checks each input against its
envelope range first (status 2, NaN included), at the exact bound the generator wrote
(rounded outward to the kernel's precision); the robustness set's vectors get the
statuses their labels expect; the header lists one code per line."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify import hostlib, vectors
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel
from mbforge.ir import symbol
from mbforge.manifest import Manifest
from mbforge.pipeline import generate

C_TARGETS = ("c-double", "c-float32", "c-fixed", "c-fixed-m0", "hls-c")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    root = tmp_path_factory.mktemp("status")
    k = build_kernel(load("fourbar").equations(), "kinematics")
    for t in C_TARGETS:
        generate(k, t).write(root / t)
    return k, root


def test_envelope_is_the_hull_of_the_domain_or_the_declared_box():
    x, y = symbol("x"), symbol("y")
    k = Kernel("m", "k", [InPort("in", [x, y], [(-1.0, 1.0), (0.0, 5.0)])], [OutPort.vector("o", [x * y])])
    assert k.input_envelope() == [(-1.0, 1.0), (0.0, 5.0)]
    k.domain = [[(-0.5, 0.0), (1.0, 2.0)], [(0.25, 0.5), (0.5, 1.5)]]
    assert k.input_envelope() == [(-0.5, 0.5), (0.5, 2.0)]


def test_header_lists_one_code_per_line(kernels):
    _, root = kernels
    for t in C_TARGETS:
        m = Manifest.load(root / t)
        h = (root / t / m.headers[0]).read_text()
        lines = h.splitlines()
        at = lines.index(" * Returns a status:") + 1
        codes = []
        while lines[at].startswith(" *   "):
            codes.append(lines[at].split()[1])
            at += 1
        assert codes == (["0", "1", "2"] if m.real == "int32" else ["0", "2"]), h
        assert "*   2 if an input is outside its envelope range" in h
        assert sorted(m.status_codes) == sorted(codes)


def _edges(m: Manifest, lo: float, hi: float, k: int):
    """(the last value the kernel must accept, the first it must refuse) above hi and
    below lo, in the kernel's raw type, computed here from the rule (not read from the C)."""
    if m.real == "int32":
        f = int(vectors.frac_bits(m, "inputs")[k])
        a, b = math.floor(lo * 2.0 ** f), math.ceil(hi * 2.0 ** f)
        return [(b, b + 1), (a, a - 1)]
    dt = np.float32 if m.real == "float" else np.float64
    up = dt(hi) if float(dt(hi)) >= hi else np.nextafter(dt(hi), dt(np.inf))
    dn = dt(lo) if float(dt(lo)) <= lo else np.nextafter(dt(lo), dt(-np.inf))
    return [(up, np.nextafter(up, dt(np.inf))), (dn, np.nextafter(dn, dt(-np.inf)))]


@pytest.mark.host
@pytest.mark.parametrize("target", C_TARGETS)
def test_inputs_checked_at_the_envelope_bound(kernels, target):
    k, root = kernels
    _edges_give_status_2(k, root / target)


@pytest.mark.host
@pytest.mark.parametrize("target", ["c-double", "c-float32"])
def test_checks_apart_from_a_kernel_that_spills(tmp_path, target):
    """The float targets move the checks into a function of their own where the allocation
    spills (the Stewart equations): the same statuses at the same bounds."""
    k = build_kernel(load("stewart").equations(), "equations")
    generate(k, target).write(tmp_path)
    assert "_equations_outside(in)) return 2;" in next(tmp_path.glob("*.c")).read_text()
    _edges_give_status_2(k, tmp_path)


def _edges_give_status_2(k, d):
    m = Manifest.load(d)
    kern = hostlib.load_kernel(d)
    env = k.input_envelope()
    assert [e for g in m.inputs for e in g.envelope] == [list(r) for r in env]
    Y, st = kern(vectors.to_raw(m, vectors.draw(m, d, 3000, seed=4)))
    assert (st == 0).all()  # the domain, and the motion
    base = vectors.to_raw(m, vectors.draw(m, d, 1, seed=0, motion=False))[0]
    rows, want = [], []
    for j, (lo, hi) in enumerate(env):
        for inside, outside in _edges(m, lo, hi, j):
            # at the edge, with the other inputs where they were, the state is off the
            # manifold: fixed point may saturate (1), but must not refuse it
            for v, s in ((inside, {0, 1}), (outside, {2})):
                r = base.copy()
                r[j] = v
                rows.append(r)
                want.append(s)
        if m.real != "int32":
            r = base.copy()
            r[j] = np.nan
            rows.append(r)
            want.append({2})
    Y, st = kern(np.array(rows, dtype=kern.dtype))
    assert all(int(a) in b for a, b in zip(st, want)), list(zip(st.tolist(), want))
    assert (Y[st == 2] == 0).all()  # nothing written: the caller's zeros


@pytest.mark.host
@pytest.mark.parametrize("target", C_TARGETS)
def test_robustness_set_gets_the_statuses_of_its_labels(kernels, target):
    _, root = kernels
    d = root / target
    m = Manifest.load(d)
    rob = vectors.robustness(m, d)
    n_in = m.n_in
    out = sum(lab.startswith(vectors.OUT_OF_ENVELOPE) for lab in rob.labels)
    assert out == n_in * (2 if m.real == "int32" else 3)  # each side of each input (+ NaN)
    assert rob.labels.count(vectors.OFF_MANIFOLD) > 0 and not rob.notes
    _, st = hostlib.load_kernel(d)(vectors.to_raw(m, rob.X))
    for lab, exp, s in zip(rob.labels, rob.expected, st):
        assert s in exp, (lab, s)
    lo, hi = vectors.envelope(m, d)
    off = np.array([lab == vectors.OFF_MANIFOLD for lab in rob.labels])
    assert ((rob.X[off] >= lo) & (rob.X[off] <= hi)).all()  # off the manifold, inside the envelope


@pytest.mark.host
def test_an_envelope_narrower_than_a_float32_unit(tmp_path):
    """A constant coordinate (a zero-width envelope at 0.1, not a float32): the float
    kernel accepts its nearest float (bounds rounded outward), the double reference
    refuses that float but accepts it moved back into the envelope (for_reference)."""
    x, y = symbol("nw_x"), symbol("nw_y")
    k = Kernel("nw", "k", [InPort("v", [x, y], [(-1.0, 1.0), (-1.0, 1.0)])], [OutPort.vector("o", [x * y + y])],
               domain=[[(0.1, 0.1), (-1.0, 1.0)]])
    generate(k, "c-float32").write(tmp_path / "f")
    generate(k, "c-double").write(tmp_path / "d")
    m = Manifest.load(tmp_path / "f")
    X = vectors.draw(m, tmp_path / "f", 50, seed=1)
    Xd = vectors.to_raw(m, X)
    assert (hostlib.load_kernel(tmp_path / "f")(Xd)[1] == 0).all()
    used = vectors.from_raw(m, Xd, "inputs")
    ref = hostlib.load_kernel(tmp_path / "d")
    assert (ref(used)[1] == 2).all()
    assert (ref(vectors.for_reference(m, tmp_path / "f", used))[1] == 0).all()


@pytest.mark.host
def test_float_checks_as_bit_patterns_refuse_what_a_float_comparison_refuses(tmp_path):
    """c-float32's checks apart compare IEEE-754 bit patterns as integers (backends.c
    bit_check). Compiled by the real gcc, on every kind of range (symmetric, [0, 0], one
    point, one sign, lo = 0, hi = 0, straddling 0) and every kind of value (signed zeros,
    both infinities, NaNs of either sign, subnormals, the neighbours of each end), they
    refuse exactly what !(lo <= x && x <= hi) in float refuses."""
    import ctypes
    import subprocess

    from mbforge.backends.c import DIALECTS, _outside_function

    env = [(-1.0, 1.0), (0.0, 0.0), (1.0, 1.0), (0.5, 7.25), (-3.0, -0.125), (0.0, 2.0), (-2.0, 0.0),
           (-1e-3, 5.0), (-6.0, 0.25), (-0.1, 0.1), (0.1, 0.3)]
    lines = _outside_function("t_outside", DIALECTS["c-float32"], env)
    src = "\n".join(["#include <stdint.h>", "#include <string.h>", "#include <math.h>", *lines,
                     "int t_check(const float *in) { return t_outside(in); }", ""])
    assert "_bits(in + 0) << 1 >" in src  # the bit-pattern form, not a float comparison
    (tmp_path / "t.c").write_text(src)
    lib = tmp_path / "t.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "t.c")], check=True)
    check = ctypes.CDLL(str(lib)).t_check
    check.argtypes = [np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")]
    f32 = np.float32
    special = [f32(0.0), f32(-0.0), f32(np.inf), f32(-np.inf), f32(np.nan),
               np.uint32(0xFFC00001).view(f32), np.uint32(0x00000001).view(f32), np.uint32(0x80000001).view(f32),
               f32(1e-40), f32(-1e-40), f32(3.4e38), f32(-3.4e38)]
    inside = [f32((lo + hi) / 2) for lo, hi in env]
    n = 0
    for j, (lo, hi) in enumerate(env):
        lo32 = f32(lo) if float(f32(lo)) <= lo else np.nextafter(f32(lo), f32(-np.inf))  # outward, as written
        hi32 = f32(hi) if float(f32(hi)) >= hi else np.nextafter(f32(hi), f32(np.inf))
        near = [np.nextafter(e, f32(s)) for e in (lo32, hi32) for s in (-np.inf, np.inf)] + [lo32, hi32]
        near += [-v for v in near]
        for v in special + near:
            x = np.array(inside, dtype=f32)
            x[j] = v
            want = not (lo32 <= v <= hi32)
            assert check(x) == int(want), (j, (lo, hi), float(v), hex(int(np.array(v).view(np.uint32))))
            n += 1
    assert n > 200
