"""An independent check of fixed-point error bounds with Gappa (a proof assistant for
numerical bounds; Debian's `gappa`).

For chosen outputs of a fixed-point program, the tape is written twice in Gappa's
language: once with every rounding of the c-fixed semantics (fixed<-f, nu>: the
round-half-up of rsh), once exactly; Gappa then proves an enclosure of their difference
for inputs in the declared box. When that enclosure lies inside mbforge's bound, the
bound is confirmed by a second, unrelated derivation. Only +, -, * and negation are
translated (the polynomial parts of a kernel); outputs reaching a division, square root
or sin/cos are skipped.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from fractions import Fraction

from .fixedpoint import FixedProgram, const_bits

POLY = ("add", "sub", "mul", "neg")


def _num(v: float) -> str:
    """An exact Gappa literal for the double v (m b e means m * 2^e)."""
    fr = Fraction(v)
    n, d = fr.numerator, fr.denominator
    e = d.bit_length() - 1
    if d != 1 << e:  # pragma: no cover - doubles are dyadic
        raise ValueError(v)
    return f"{n}b-{e}" if e else str(n)


def _dyadic(ci: int, f: int) -> str:
    return f"{ci}b-{f}" if f > 0 else f"{ci}b{-f}" if f < 0 else str(ci)


def _parse(text: str) -> float:
    m = re.fullmatch(r"(-?\d+)b(-?\d+)", text)
    if m:
        return int(m.group(1)) * 2.0 ** int(m.group(2))
    return float(text)


def _computed(o) -> str:
    """The Gappa name of operand o's computed (rounded) value."""
    kind, v = o
    return f"t{v}" if kind == "t" else f"x{v}" if kind == "in" else f"({_num(v)})"


def _exact(o) -> str:
    """The Gappa name of operand o's exact value."""
    kind, v = o
    return f"E{v}" if kind == "t" else f"x{v}" if kind == "in" else f"({_num(v)})"


def _polynomial_cone(producer: dict, o) -> bool:
    """Whether every instruction that output o depends on is +, -, * or negation."""
    stack = [o]
    seen = set()
    while stack:
        kind, v = stack.pop()
        if kind != "t" or v in seen:
            continue
        seen.add(v)
        ins = producer[v]
        if ins.op not in POLY:
            return False
        stack.extend(ins.args)
    return True


def _assignment(fx: FixedProgram, ins, rnd) -> tuple[str, str]:
    """The computed and the exact right-hand side of a polynomial instruction; rnd(f)
    names the rounding to format f."""
    a = ins.args
    p = ins.params
    f = fx.temp_bits[ins.dst[0]]
    if ins.op in ("add", "sub"):
        terms = []
        for o, (kind, val) in zip(a, p["align"]):
            if kind == "lit":
                terms.append(_dyadic(val, p["F"]))
            elif val < 0:  # a finer operand is rounded to the common format first
                terms.append(f"{rnd(p['F'])}({_computed(o)})")
            else:
                terms.append(_computed(o))
        sign = " + " if ins.op == "add" else " - "
        rhs = f"{rnd(f)}({sign.join(terms)})" if p["s"] > 0 else sign.join(terms)
        return rhs, f"{_exact(a[0])}{sign}{_exact(a[1])}"
    if ins.op == "neg":
        return f"-{_computed(a[0])}", f"-{_exact(a[0])}"
    if "lit" in p:
        x = a[1] if p["const_first"] else a[0]
        c = a[0] if p["const_first"] else a[1]
        lit = _dyadic(p["lit"], const_bits(c[1]))
        prod, exact = f"{_computed(x)} * {lit}", f"{_exact(x)} * {_exact(c)}"
    else:
        prod, exact = f"{_computed(a[0])} * {_computed(a[1])}", f"{_exact(a[0])} * {_exact(a[1])}"
    return (f"{rnd(f)}({prod})" if p["s"] > 0 else prod), exact


def script(fx: FixedProgram, outputs: list[int], input_box) -> tuple[str, list[int]]:
    """Gappa script bounding |computed - exact| for the given flat outputs (those whose
    cone is polynomial); returns the script and the outputs it covers."""
    tape = fx.tape
    producer = {}
    for ins in fx.instrs:
        for d in ins.dst:
            producer[d] = ins
    covered = [k for k in outputs if tape.outputs[k][0] == "t" and _polynomial_cone(producer, tape.outputs[k])]
    lines = []
    fmts = set()

    def rnd(f: int) -> str:
        fmts.add(f)
        return f"r{f}" if f >= 0 else f"rm{-f}"

    for ins in fx.instrs:
        if ins.op not in POLY:
            continue
        rhs, exact = _assignment(fx, ins, rnd)
        lines.append(f"t{ins.dst[0]} = {rhs};")
        lines.append(f"E{ins.dst[0]} = {exact};")
    # the kernel's inputs are int32 words: values on their formats' grids
    inputs = [f"x{k} = {rnd(fx.in_bits[k])}(X{k});" for k in range(len(input_box))]
    head = [f"@{rnd(f)} = fixed<{-f},nu>;" for f in sorted(fmts)]
    hyp = " /\\ ".join(f"X{k} in [{_num(lo)}, {_num(hi)}]" for k, (lo, hi) in enumerate(input_box))
    goals = " /\\ ".join(f"t{tape.outputs[k][1]} - E{tape.outputs[k][1]} in ?" for k in covered)
    return "\n".join(head + inputs + lines + [f"{{ {hyp} -> {goals} }}"]) + "\n", covered


def prove(fx: FixedProgram, outputs: list[int], input_box, timeout: float = 60.0) -> dict[int, float]:
    """{output index: the bound Gappa proves on |computed - exact|}."""
    if shutil.which("gappa") is None:
        raise RuntimeError("gappa not found (Debian package gappa; scripts/bootstrap.sh installs it)")
    text, covered = script(fx, outputs, input_box)
    if not covered:
        return {}
    r = subprocess.run(["gappa"], input=text, capture_output=True, text=True, timeout=timeout)
    found = re.findall(r"t(\d+) - E\1 in \[([^\]]+)\]", r.stdout + r.stderr)
    if len(found) != len(covered):
        raise RuntimeError(f"gappa did not bound every output:\n{r.stdout}\n{r.stderr}")
    by_temp = {}
    for t, interval in found:
        # each end reads "m b e {decimal, ...}" or "0": take the exact dyadic part
        ends = [e.split("{")[0].strip() for e in re.split(r",\s*(?![^{]*\})", interval)]
        by_temp[int(t)] = max(abs(_parse(e)) for e in ends)
    return {k: by_temp[fx.tape.outputs[k][1]] for k in covered}
