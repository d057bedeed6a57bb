"""Hardware lowering, HLS C and RTL generation without a simulator: the numpy model of the
hardware operators and the HLS C are bit-exact with the c-fixed C; schedules keep their
promises (latency = critical path, unit limits); generation is deterministic."""
import json
import subprocess

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify import hostlib
from mbforge.backends.rtl.schedule import (LATENCY, MEMORY_MIN, SHARED_INTERVAL, SHARED_LATENCY, default_units,
                                            delay_plan, pipeline, shared, unit_class)
from mbforge.lower import lower
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.analysis.fixedpoint import plan_fixed
from mbforge.backends.rtl.lower import evaluate, lower_hw
from mbforge.analysis.ranges import analyse_domain
from mbforge.pipeline import GenerateError, generate

from helpers.hdl_kernels import fourbar_equations, functions_kernel

pytestmark = pytest.mark.host


def _program(k):
    tape = lower(k.output_atoms, k.input_symbols)
    return lower_hw(plan_fixed(tape, analyse_domain(tape, k.domain or [k.input_ranges])))


def _vectors(m, n, seed, kernel_dir):
    from mbforge.verify.vectors import draw_raw

    rng = np.random.default_rng(seed)
    # within the envelope (the declared box may exceed what the formats hold: refused)
    r = np.array([e for g in m.inputs for e in g.envelope])
    Xi = hostlib.to_raw(m, r[:, 0] + (r[:, 1] - r[:, 0]) * rng.random((n, m.n_in)))
    wild = rng.integers(-2 ** 31, 2 ** 31, size=(n, m.n_in)).astype(np.int32)  # saturating inputs too
    edge = np.array([[v] * m.n_in for v in (0, 1, -1, 2 ** 31 - 1, -2 ** 31)], dtype=np.int32)
    # and the kernel's own vectors (consistent states, where nothing saturates): random
    # points of the envelope's box may saturate everywhere on a closed loop
    return np.vstack([draw_raw(m, kernel_dir, 200, seed), Xi, wild, edge])


KERNELS = {"functions": functions_kernel, "fourbar": fourbar_equations,
           "slidercrank-kinematics": lambda: build_kernel(load("slidercrank").equations(), "kinematics")}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_hardware_model_is_bit_exact_with_c_fixed(name, tmp_path):
    k = KERNELS[name]()
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    X = _vectors(m, 5000, 1, tmp_path)
    Y, st = hostlib.load_kernel(tmp_path)(X)
    Y2, st2 = evaluate(_program(k), X)
    # the C refuses words outside the envelope (status 2, bounds rounded outward) before
    # computing; the hardware model has no such check: it is the C where the C computes
    f = np.array([b for g in m.inputs for b in g.frac_bits], dtype=np.float64)
    env = np.array([e for g in m.inputs for e in g.envelope])
    out = ((X < np.floor(env[:, 0] * 2 ** f)) | (X > np.ceil(env[:, 1] * 2 ** f))).any(axis=1)
    assert (st[out] == 2).all() and not (st[~out] == 2).any() and (st == 0).any()
    assert np.array_equal(Y[~out], Y2[~out]) and np.array_equal(st[~out], st2[~out])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_hls_c_is_warning_free_and_bit_exact_with_c_fixed(name, tmp_path):
    k = KERNELS[name]()
    generate(k, "c-fixed").write(tmp_path / "fixed")
    plan = generate(k, "hls-c")
    plan.write(tmp_path / "hls")
    m = Manifest.load(tmp_path / "hls")
    src = (tmp_path / "hls" / m.sources[0]).read_text()
    proc = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-c",
                           "-o", str(tmp_path / "k.o"), str(tmp_path / "hls" / m.sources[0])],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for pragma in ("#pragma HLS interface mode=ap_ctrl_hs port=return", "#pragma HLS interface mode=ap_none port=in_0",
                   "#pragma HLS interface mode=ap_vld port=out_0", "#pragma HLS pipeline II=1"):
        assert pragma in src
    assert f"int {m.function}_hw(int32_t in_0" in src
    for banned in ("math.h", "malloc", "while"):
        assert banned not in src
    X = _vectors(m, 5000, 2, tmp_path / "fixed")
    Y, st = hostlib.load_kernel(tmp_path / "fixed")(X)
    Y2, st2 = hostlib.load_kernel(tmp_path / "hls")(X)
    assert np.array_equal(Y, Y2) and np.array_equal(st, st2)


def _critical_path(hp):
    ready = {}
    for op in hp.ops:
        t = max((0 if s[0] == "in" else ready[s[1]] for s in op.srcs), default=0)
        ready[op.id] = t + LATENCY[op.kind]
    return max([ready[o[1]] for o in hp.outputs if o[0] == "h"] + [1])


def test_pipelined_latency_is_the_critical_path_and_shared_respects_unit_limits():
    hp = _program(functions_kernel())
    ps = pipeline(hp)
    assert ps.latency == _critical_path(hp)
    for op in hp.ops:  # every operand is ready when read, through a delay line long enough
        for s in op.srcs:
            assert 0 <= ps.start[op.id] - ps.ready[s] <= ps.depth[s]
    units = default_units(hp, 2)
    ss = shared(hp, units)
    per = {}
    on_unit = {}
    for op in hp.ops:
        c = unit_class(op.kind)
        per[(c, ss.issue[op.id])] = per.get((c, ss.issue[op.id]), 0) + 1
        on_unit.setdefault((c, ss.unit[op.id]), []).append(ss.issue[op.id])
        assert ss.ready[("h", op.id, 0)] == ss.issue[op.id] + SHARED_LATENCY[op.kind]
        for s in op.srcs:
            assert ss.issue[op.id] >= ss.ready[s]
    assert all(n <= units[kind] for (kind, _), n in per.items())
    assert units["mul"] == 2 and "tsel" not in units  # quadrant selections go to the adders
    # an iterative unit takes its next operation SHARED_INTERVAL cycles after the last
    for (c, _), ts in on_unit.items():
        ts.sort()
        assert all(b - a >= SHARED_INTERVAL.get(c, 1) for a, b in zip(ts, ts[1:])), (c, ts)
    assert any(len(on_unit.get((c, 0), ())) > 1 for c in SHARED_INTERVAL)


def test_verilog_generation_is_deterministic_and_checks_options(tmp_path):
    k = functions_kernel()
    for variant in ("pipelined", "shared"):
        # (same bytes from a fresh process: test_determinism.py, test_install.py)
        a = generate(k, "verilog", options={"variant": variant, "multipliers": 2})
        rtl = json.loads(a.files["rtl.json"])
        assert rtl["top"] == "hk_functions_hw" and rtl["variant"] == variant
        assert a.manifest.sources == ["hk_functions_hw.v", "hk_functions_hw_ops.v"]
        assert a.manifest.real == "int32" and all(g.error_bound for g in a.manifest.outputs)
    assert json.loads(generate(k, "verilog", options={"variant": "shared", "multipliers": 1}).files["rtl.json"])["units"]["mul"] == 1
    with pytest.raises(GenerateError, match="variant"):
        generate(k, "verilog", options={"variant": "systolic"})
    with pytest.raises(GenerateError, match="multipliers"):
        generate(k, "verilog", options={"variant": "shared", "multipliers": 0})


def _bits(hp, start, lat, hold):
    """Delay-line bits of start cycles, counted from scratch: per value, its width times
    the cycles from ready to its last read (or to `hold`, the cycle an aligned output leaves)."""
    def ready(ref):
        return 0 if ref[0] == "in" else start[ref[1]] + lat[hp.ops[ref[1]].kind]
    last = {}
    for op in hp.ops:
        for s in op.srcs:
            last[s] = max(last.get(s, 0), start[op.id])
    for o in hp.outputs:
        if o[0] != "c" and hold is not None:
            last[o] = max(last.get(o, 0), hold)
    return sum((t - ready(r)) * (32 if r[0] == "in" else hp.ops[r[1]].widths[r[2]]) for r, t in last.items())


@pytest.mark.parametrize("outputs", ["aligned", "early"])
def test_pipelined_schedule_has_the_fewest_delay_line_bits(outputs):
    """On a small kernel, the linear program's start cycles are as good as the best of every
    schedule of the same latency (enumerated); on the four-bar's kinematics it beats ASAP/ALAP."""
    import itertools

    from helpers.hdl_kernels import tiny_kernel

    hp = _program(tiny_kernel())
    ps = pipeline(hp, outputs=outputs)
    T, lat = ps.latency, ps.lat
    hold = T if outputs == "aligned" else None
    assert _bits(hp, ps.start, lat, hold) == ps.delay_bits
    ranges = [range(0, T - lat[op.kind] + 1) for op in hp.ops]
    best = None
    for start in itertools.product(*ranges):
        ok = all(start[op.id] >= (0 if s[0] == "in" else start[s[1]] + lat[hp.ops[s[1]].kind])
                 for op in hp.ops for s in op.srcs)
        if ok:
            b = _bits(hp, start, lat, hold)
            best = b if best is None else min(best, b)
    assert ps.delay_bits == best
    from helpers.hdl_kernels import fourbar_kinematics

    big = _program(fourbar_kinematics())
    new, old = pipeline(big, outputs=outputs), pipeline(big, outputs=outputs, min_registers=False)
    assert new.policy == "min-registers" and new.delay_bits < old.delay_bits
    assert new.delay_bits == _bits(big, new.start, new.lat, new.latency if outputs == "aligned" else None)
    for op in big.ops:
        for s in op.srcs:
            assert 0 <= new.start[op.id] - new.ready[s] <= new.depth[s]
    if outputs == "early":
        assert new.delay_bits < pipeline(big, outputs="aligned").delay_bits
        assert new.out_cycle == [new.ready[o] if o[0] != "c" else 0 for o in big.outputs]


@pytest.mark.parametrize("min_length", [2, 5, MEMORY_MIN])
def test_delay_plan_keeps_every_delay_and_puts_long_wide_segments_in_memories(min_length):
    """The four-bar kinematics' delay lines, cut at their taps: every reader's delay is a stage
    of a shift register or the end of a ring buffer segment, the bits add up to the schedule's, the
    memories hold the segments of min_length or more (16 bits wide or more), the 3x goal of
    issue 14 holds at the default, and ffs is all flip-flops."""
    from helpers.hdl_kernels import fourbar_kinematics

    hp = _program(fourbar_kinematics())
    ps = pipeline(hp, outputs="early")
    plan = delay_plan(hp, ps, "memory", min_length)
    width = {r: 32 if r[0] == "in" else hp.ops[r[1]].widths[r[2]] for r in ps.taps}
    ends = ({(r, d) for r, a, b in plan.chains for d in range(a + 1, b + 1)}
            | {(r, a + m["length"]) for m in plan.memories for r, a in m["parts"]})
    assert ends >= {(s, ps.start[op.id] - ps.ready[s]) for op in hp.ops for s in op.srcs
                    if ps.start[op.id] > ps.ready[s]}
    in_mem = sum(m["length"] * w for m in plan.memories for w in [m["width"]])
    assert plan.ff_bits - plan.pointer_bits + in_mem == ps.delay_bits
    assert all(m["length"] >= min_length and m["width"] >= 16 and m["depth"] >= m["length"]
               and m["width"] == sum(width[r] for r, _ in m["parts"]) for m in plan.memories)
    for r, a, b in plan.chains:  # a wide value's shift register: only segments shorter than min_length
        cuts = [a] + [t for t in ps.taps[r] if a < t <= b]
        assert cuts[-1] == b and (width[r] < 16 or max(np.diff(cuts)) < min_length)
    assert plan.pointer_bits == (max(m["depth"] for m in plan.memories) - 1).bit_length()
    if min_length == MEMORY_MIN:
        assert 3 * plan.ff_bits <= 28296  # issue 14: the baseline's delay-line bits / 3
    ffs = delay_plan(hp, ps, "ffs")
    assert ffs.memories == [] and ffs.ff_bits == ps.delay_bits


def test_products_by_few_signed_digits_become_shift_adds_bit_exact():
    """rtl.lower.shift_constants: a product by +-2^k (and, in shift-add mode, +-2^p +-2^q) is an
    add op with the same value and flag as the multiplier on any int32 operand, extremes and
    saturating ones included; three digits (11) stay a multiplier; multiply mode changes nothing."""
    from mbforge.backends.rtl.lower import HwOp, HwProgram, shift_constants, signed_digits

    assert signed_digits(7) == [(0, -1), (3, 1)] and signed_digits(-2 ** 31) == [(31, -1)]
    lits = [1, -1, 2, 2 ** 30, -2 ** 31, 3, -6, 7, 2 ** 31 - 1, 5 << 20, -(3 << 9), 11]
    ops = [HwOp(i, "mul", (("in", i % 2),), {"lit": c, "s": s}) for i, (c, s) in
           enumerate((c, s) for c in lits for s in (0, 1, 7, 30, 40))]
    hp = HwProgram(ops, [("h", op.id, 0) for op in ops], 2, [20, 20], [20] * len(ops))
    rng = np.random.default_rng(2)
    X = np.vstack([rng.integers(-2 ** 31, 2 ** 31, size=(3000, 2)), rng.integers(-300, 300, size=(3000, 2)),
                   [[v, -v - 1] for v in (0, 1, 2 ** 31 - 1, 2 ** 15, 3)]])
    want, flags = evaluate(hp, X)
    per_op = [evaluate(HwProgram([op], [("h", 0, 0)], 2, [20, 20], [20]), X)[1] for op in
              [HwOp(0, o.kind, o.srcs, o.p) for o in ops]]
    for mode, kept in (("shift-add", {11}), ("shift", {3, -6, 7, 2 ** 31 - 1, 5 << 20, -(3 << 9), 11}),
                       ("multiply", set(lits))):
        h2, n = shift_constants(hp, mode)
        assert n == 5 * (len(lits) - len(kept))
        assert {op.p["lit"] for op in h2.ops if op.kind == "mul"} == kept
        got, gflags = evaluate(h2, X)
        assert np.array_equal(got, want) and np.array_equal(gflags, flags)
        for o2, f in zip(h2.ops, per_op):  # each op's saturation flag, not only their union
            assert np.array_equal(evaluate(HwProgram([HwOp(0, o2.kind, o2.srcs, o2.p)], [("h", 0, 0)], 2, [20, 20],
                                                     [20]), X)[1], f)
    assert any(f.any() for f in per_op) and not all(f.all() for f in per_op)
