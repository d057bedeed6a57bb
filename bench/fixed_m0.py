"""Fixed point on the Cortex-M0 (issue 33 item 5): instructions per call of c-fixed, c-fixed-m0
(the same plan and bits through M0 primitives) and c-float32 in software floating point
(libgcc's), on the emulated micro:bit (nRF51, 16 MHz Cortex-M0, QEMU -icount: SysTick
turned into instructions by the CALIB request, exact), the median over 16 vectors of each
kernel's domain, and per operation of the kernel. Default: the delta robot's reduced
inverse dynamics over its declared workspace (platform in, three torques out: issue 33's
kernel), or the shipped kernels given with --kernels.

Measured (this bench, default kernel; instructions per call, per operation in brackets):
c-fixed 26,792 (43.4), software float 63,879 (103.5); c-fixed-m0 with C-only helpers
22,135 (35.9), then with the Thumb-1 paths of backends/templates/c/fixed.c.j2, one at a
time: products on ADDS/ADCS carries -3,390, the square root on 32-bit words -2,159, every
product inlined (GCC left 80 of 279 out of line, s a variable) -1,087, the sums' ADDS/SUBS
+ BVC -1,182, one LSLS for a product's range check and result -259, the rounding shift's
ASRS + ADCS -243, a square's one middle product (29 of 279) -230: 13,585 (22.0), 4.7 times
fewer than software float.

    python -m bench.fixed_m0 [--kernels delta:inverse-dynamics-reduced,fourbar:kinematics] [--env emulated_microbit] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from mbforge.targets import EMULATED_BOARDS

from . import check_json, run
from .op_costs import generate, instructions

TARGETS = ("c-fixed", "c-fixed-m0", "c-float32")


def measure(pairs: list[tuple[str, str]], env: str) -> list[dict]:
    from mbforge.manifest import Manifest

    rows = []
    with tempfile.TemporaryDirectory(prefix="mbf_fixed_m0_") as tmp:
        tmp = Path(tmp)
        for model, kernel in pairs:
            row = {"kernel": f"{model} {kernel}", "env": env}
            for target in TARGETS:
                d = generate(model, kernel, target, tmp / "k")
                if d is None:  # the target refuses the kernel (a c-fixed divisor): no figure
                    row[target] = None
                    continue
                row["ops"] = Manifest.load(d).ops["total"]
                row[target] = instructions(d, env, tmp)
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    head = f"{'kernel':<32} {'ops':>5} " + " ".join(f"{t:>18}" for t in TARGETS) + "  m0/fixed  float/m0"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = [f"{r[t]:>9,.0f} ({r[t] / r['ops']:>5.1f})" if r[t] else f"{'refused':>18}" for t in TARGETS]
        ratio = f"{r['c-fixed-m0'] / r['c-fixed']:.3f}" if r["c-fixed"] and r["c-fixed-m0"] else "-"
        soft = f"{r['c-float32'] / r['c-fixed-m0']:.2f}" if r["c-float32"] and r["c-fixed-m0"] else "-"
        lines.append(f"{r['kernel']:<32} {r['ops']:>5} " + " ".join(cells) + f"  {ratio:>8}  {soft:>8}")
    lines.append("instructions per call (per operation), median over 16 domain vectors; "
                 f"{rows[0]['env'] if rows else ''}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="delta:inverse-dynamics-reduced",
                    help="comma-separated model:kernel pairs of shipped examples")
    ap.add_argument("--env", default="emulated_microbit", choices=list(EMULATED_BOARDS), help="the emulated board")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    check_json(ap, args.json)
    pairs = [tuple(p.split(":", 1)) for p in args.kernels.split(",") if p]
    if not pairs or any(len(p) != 2 for p in pairs):
        ap.error(f"--kernels {args.kernels}: expected model:kernel pairs")
    rows = measure(pairs, args.env)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    run("fixed_m0", lambda: main(__import__("sys").argv[1:]))
