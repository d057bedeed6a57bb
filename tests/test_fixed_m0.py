"""c-fixed-m0 (issue 33 item 5): c-fixed's plan printed with Cortex-M0 primitives (the
32 x 32 -> 64 product of 16-bit partial products, a 64/32 shift-subtract division). The
same formats and bounds as c-fixed, the same bits: its helpers against c-fixed's on edge
and random words (host gcc), the delta robot's inverse dynamics against c-fixed at
consistent states and at random words inside the envelope (saturating ones included),
and on the emulated micro:bit (16 MHz Cortex-M0): bit-exact with the host build, within
its bounds, under 14,000 instructions per call."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from mbforge.backends.fixed.c import envelope_words
from mbforge.backends.render import render_template
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.pipeline import generate
from mbforge.verify import hostlib
from mbforge.verify.vectors import draw_raw

HELPERS_MAIN = r"""
#include <stdint.h>
#include <stdio.h>
%s
static uint64_t s = 88172645463325252u;
static uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static const int64_t EDGE[] = {0, 1, -1, 2, -2, 65535, 65536, -65536, -65537, 32767, -32768,
    INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, (int64_t)1 << 32, -((int64_t)1 << 32),
    ((int64_t)1 << 62) - 1, -((int64_t)1 << 62), INT64_MAX, INT64_MIN, INT64_MIN + 1};
int main(void)
{
    long bad = 0, n = 0, sat = 0, rsat = 0;
    const int ne = sizeof EDGE / sizeof EDGE[0];
    for (long i = 0; i < 400000 + ne * ne; i++, n++) {
        int64_t a; int32_t d;
        if (i < ne * ne) { a = EDGE[i / ne]; d = (int32_t)EDGE[i %% ne]; }
        else {
            const int sh = (int)(rnd() %% 64);
            a = (int64_t)rnd() >> sh;
            d = (int32_t)((int64_t)(int32_t)rnd() >> (rnd() %% 32));
        }
        const int32_t a32 = (int32_t)a;
        if (t_mul64(a32, d) != (int64_t)a32 * d) bad++;
        const int s = 1 + (int)(i %% 62);
        uint32_t m1 = 0, m2 = 0;
        if (t_mulrs(a32, d, s, &m1) != t_sat(t_rsh((int64_t)a32 * d, s), &m2) || m1 != m2) bad++;
        if (t_sqrrs(d, s, &m1) != t_sat(t_rsh((int64_t)d * d, s), &m2) || m1 != m2) bad++;
        uint32_t o1 = 0, o2 = 0;
        const int32_t q1 = t_div(a, d, &o1), q2 = t_div_m0(a, d, &o2);
        if (q1 != q2 || o1 != o2) bad++;
        sat += o1;
        uint32_t r1 = 0, r2 = 0;
        if (t_sqrt_m0(a, &r1) != t_sqrt(a, &r2) || r1 != r2) bad++;
        rsat += r1;
    }
    printf("%%ld %%ld %%ld %%ld\n", n, bad, sat, rsat);
    return 0;
}
"""


def test_the_m0_helpers_equal_c_fixed_ones_on_edge_and_random_words(tmp_path):
    """t_mul64 against the int64 product, t_mulrs against t_sat(t_rsh(a * b, s)) and t_sqrrs
    against t_sat(t_rsh(b * b, s)) for every s of 1 to 62, t_div_m0 against t_div and t_sqrt_m0 against t_sqrt (result and flag), over
    every pair of edge words and 400,000 random ones of all magnitudes (gcc, the host's C
    path of the division and of t_mulc)."""
    helpers = render_template("c/fixed.c.j2", p="t", div=True, sqrt=True, m0=True, trig=None)
    src = tmp_path / "h.c"
    src.write_text(HELPERS_MAIN % helpers)
    exe = tmp_path / "h"
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-Wno-unused-function", str(src), "-o", str(exe)], check=True)
    n, bad, sat, rsat = map(int, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert n > 400_000 and bad == 0
    assert 0 < sat < n and 0 < rsat < n  # the quotient (root) path and the saturating fallback are exercised


@pytest.fixture(scope="module")
def delta(tmp_path_factory):
    k = build_kernel(load("delta", workspace="first").equations(), "inverse-dynamics")  # natural coordinates
    root = tmp_path_factory.mktemp("delta_m0")
    made = {}
    for target in ("c-fixed", "c-fixed-m0", "c-double"):
        plan = generate(k, target)
        made[target] = (plan.manifest, plan.write(root / target))
    return made


def test_c_fixed_m0_keeps_c_fixed_plan(delta):
    (mf, df), (mm, dm) = delta["c-fixed"], delta["c-fixed-m0"]
    assert mm.target == "c-fixed-m0" and mf.target == "c-fixed"
    for a, b in ((mf.inputs, mm.inputs), (mf.outputs, mm.outputs)):
        assert [p.frac_bits for p in a] == [p.frac_bits for p in b]
        assert [p.error_bound for p in a] == [p.error_bound for p in b]
    src = (dm / "delta.c").read_text()
    assert "delta_mul64(" in src and "delta_div_m0(" in src and "(int64_t)w1 * w" not in src


def _envelope_draw(m, n: int) -> np.ndarray:
    """n input vectors of words drawn inside the envelope's word ranges (inconsistent states:
    saturations among them)"""
    rng = np.random.default_rng(7)
    words = envelope_words([tuple(e) for p in m.inputs for e in p.envelope], [f for p in m.inputs for f in p.frac_bits])
    return np.stack([rng.integers(lo, hi, n, endpoint=True) for lo, hi in words], axis=1).astype(np.int32)


def _bit_exact(fixed_dir, m0_dir, m, consistent: int, random: int) -> np.ndarray:
    """The two kernels' outputs and statuses equal at `consistent` states of the domain and at
    `random` input words drawn inside the envelope's word ranges (inconsistent states:
    saturations among them); the statuses of the random words."""
    fixed, m0 = hostlib.load_kernel(fixed_dir), hostlib.load_kernel(m0_dir)
    X = draw_raw(m, fixed_dir, consistent, seed=3, motion=False)
    R = _envelope_draw(m, random)
    status = []
    for V in (X, R):
        Yf, sf = fixed(V)
        Ym, sm = m0(V)
        assert np.array_equal(sf, sm) and np.array_equal(Yf, Ym)
        status.append(sf)
    assert (status[0] == 0).all()
    return status[1]


def test_delta_is_bit_exact_with_c_fixed_on_host(delta):
    """5,000 consistent states, 20,000 random envelope words: some saturate, so the int32
    sums' fallbacks and the saturating paths are compared too."""
    (mf, df), (mm, dm) = delta["c-fixed"], delta["c-fixed-m0"]
    assert (_bit_exact(df, dm, mf, 5000, 20_000) == 1).any()


@pytest.mark.parametrize("model, kernel", [("fourbar", "kinematics"), ("chain", "inverse-dynamics-rnea")])
def test_trig_kernels_are_bit_exact_with_c_fixed_on_host(model, kernel, tmp_path):
    """Kernels with sin/cos (c-fixed's helper) and divisions: 3,000 consistent states and
    20,000 random envelope words."""
    k = build_kernel(load(model).equations(), kernel)
    dirs = {t: generate(k, t).write(tmp_path / t) for t in ("c-fixed", "c-fixed-m0")}
    _bit_exact(dirs["c-fixed"], dirs["c-fixed-m0"], Manifest.load(dirs["c-fixed"]), 3000, 20_000)


@pytest.mark.firmware
@pytest.mark.usefixtures("deadline")
def test_delta_on_the_emulated_microbit_is_bit_exact_under_14000_instructions_and_estimated(delta, tmp_path,
                                                                                            capsys):
    """Built by `mbforge firmware` (its budget estimate from the int32-m0 record, no note on
    an M0), run through the harness: bit-exact with the host build, within its bounds, under
    14,000 instructions per call (c-fixed: 14,022.5, bench.fixed_m0), and the estimate within
    20% of that count; then 3,000 random envelope words (the Thumb-1 paths' overflow jumps
    and saturations) bit-exact with the host build, statuses included."""
    from mbforge.firmware.cli import main as firmware_cli
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.harness import run
    from mbforge.hil.link import Link

    env, dm, dd = "emulated_microbit", delta["c-fixed-m0"][1], delta["c-double"][1]
    assert firmware_cli(["--kernel", str(dm), "--out", str(tmp_path / "fw"), "--build", "--env", env]) == 0
    out, err = capsys.readouterr()
    line = next(x for x in out.splitlines() if x.startswith(f"budget {env}:"))
    estimate = int(line.split(" cycles/call")[0].rsplit(" ", 1)[1])
    assert "c-fixed-m0" not in err
    with Emulator(tmp_path / "fw" / ".pio" / "build" / env / "program.elf", board=env) as emu:
        rep = run(emu.url, dm, dd, vectors=200, host_model=True)
        with Link(emu.url, timeout=60.0) as link:
            link.hello()
            R = _envelope_draw(delta["c-fixed-m0"][0], 3000)
            got = link.eval_many(R)
    Y, st = hostlib.load_kernel(dm)(R)  # the int32 sums' jumps to their fallbacks, saturations
    assert np.array_equal(got.status, st) and np.array_equal(got.outputs, Y) and (st == 1).any()
    assert rep.passed, rep.table()
    assert rep.host_model == {"vectors_mismatched": 0, "elements_mismatched": 0}
    assert all(g.tolerance_kind == "error_bound" and g.passed for g in rep.outputs)
    w = rep.work_per_call
    assert w["unit"] == "instructions" and w["counter_overflows"] == 0
    assert 3_000 < w["median"] <= w["max"] < 14_000, w
    assert abs(estimate / w["median"] - 1) <= 0.2, (estimate, w["median"])


def test_firmware_names_the_m0_target_for_the_core():
    from mbforge.firmware.cli import target_note

    assert "--target c-fixed-m0" in target_note("c-fixed", "emulated_microbit")
    assert "--target c-fixed-m0" in target_note("c-fixed", "pico")  # the M0+
    assert "--target c-fixed computes the same bits" in target_note("c-fixed-m0", "emulated_an385")
    assert target_note("c-fixed", "emulated_an385") is None and target_note("c-fixed-m0", "pico") is None
