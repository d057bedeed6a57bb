"""Before/after table of a restructuring (issue 26 item 8): the kernels two checkouts of
mbforge generate for the same cases, compared file by file, with each kernel's operation
count and error bounds (its manifest) and, for c-double and c-fixed, its x86-64
instructions per call (gcc -O2, callgrind: bench.host's build and count).

Cases: every shipped example both checkouts have x every target both have (its equations
kernel), bench.golden's dynamics kernels, and the dynamics kernels of the examples that
have them (DYNAMICS_MORE) in c-double and c-fixed. Each checkout's own CLI
(<checkout>/.venv/bin/mbforge generate) runs in a fresh process with a fresh mbforge cache
per checkout; a refusal is recorded with its last line (the error).

    python -m bench.before_after --before DIR --after DIR --json FILE --md FILE

The instruction count cycles through the same states for both checkouts: the motion.json
vectors (at most 16) of the first that wrote one, mapped by port and index (a port one
checkout dropped gets nothing) and clamped into each kernel's own envelope, else the middle
of the inputs' envelopes; c-fixed's inputs are those values in the kernel's Q formats. A
kernel that returns a nonzero status on them gets no count (noted).
--keep DIR leaves the generated kernels in DIR/before and DIR/after for a diff.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import BenchInputError
from .cbuild import CKernel
from .golden import DYNAMICS, TIMEOUT
from .host import _callgrind

# the examples with a recursive (open tree in relative coordinates) or reduced kernel; the
# other shipped examples refuse these kernels (checked once at 15a0c96, docs/restructure.md)
DYNAMICS_MORE = [(ex, k, t) for ex, k in (("sample_arm", "forward-dynamics-aba"),
                                          ("sample_arm", "inverse-dynamics-rnea"),
                                          ("spatial_chain", "forward-dynamics-aba"),
                                          ("spatial_chain", "inverse-dynamics-rnea"),
                                          ("stewart", "inverse-dynamics-reduced"),
                                          ("stewart_relative", "inverse-dynamics-reduced"))
                 for t in ("c-double", "c-fixed")]
COUNTED = {"c-double": "double", "c-fixed": "int32_t"}  # targets counted under callgrind
CODE = (".c", ".v")  # the files that compile into the kernel (headers and records apart)
_INFO = ("import json; from mbforge.examples import EXAMPLES; from mbforge.backends import backend_names; "
         "print(json.dumps([sorted(EXAMPLES), list(backend_names())]))")


def _venv(checkout: Path) -> Path:
    return checkout / ".venv" / "bin"


def _code(text: str) -> str:
    """C or Verilog text without its comments and blank lines: what compiles."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def checkout_info(checkout: Path) -> tuple[list[str], list[str]]:
    """The examples and targets of one checkout, asked of its own interpreter."""
    r = subprocess.run([str(_venv(checkout) / "python"), "-c", _INFO], capture_output=True, text=True,
                       cwd=checkout)
    if r.returncode != 0:
        raise SystemExit(f"bench.before_after: {checkout}: its venv does not import mbforge: "
                         f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return tuple(json.loads(r.stdout))


def case_list(before: Path, after: Path) -> list[tuple[str, str, str]]:
    (ex_b, t_b), (ex_a, t_a) = checkout_info(before), checkout_info(after)
    examples = [e for e in ex_a if e in ex_b]
    targets = [t for t in t_a if t in t_b]
    return [(e, "equations", t) for e in examples for t in targets] + DYNAMICS + DYNAMICS_MORE


def generate(checkout: Path, case: tuple[str, str, str], out: Path, cache: Path) -> dict:
    """Run the checkout's CLI on one case: its files' hashes and seconds, or its refusal."""
    model, kernel, target = case
    env = dict(os.environ, MBFORGE_CACHE_DIR=str(cache))
    t0 = time.monotonic()
    try:
        r = subprocess.run([str(_venv(checkout) / "mbforge"), "generate", model, "--kernel", kernel,
                            "--target", target, "--out", str(out), "--force"],
                           capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=checkout)
    except subprocess.TimeoutExpired:
        return {"refused": f"timeout after {TIMEOUT} s", "seconds": TIMEOUT}
    rec = {"seconds": round(time.monotonic() - t0, 2)}
    if r.returncode != 0:
        rec["refused"] = f"{r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"
        return rec
    rec["files"] = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted(out.rglob("*")) if p.is_file()}
    rec["code"] = {str(p.relative_to(out)): hashlib.sha256(_code(p.read_text()).encode()).hexdigest()
                   for p in sorted(out.rglob("*")) if p.suffix in CODE}
    m = json.loads((out / "manifest.json").read_text())
    rec["ops"] = (m.get("ops") or {}).get("total")
    rec["bounds"] = {o["name"]: max(o["error_bound"]) if o.get("error_bound") else None
                     for o in m.get("outputs", [])}
    known = [b for b in rec["bounds"].values() if b is not None]
    rec["bound"] = max(known) if known else None
    return rec


def _ports(m: dict) -> list[tuple[str, int, list[float]]]:
    """(port, index in the port, [lo, hi] of its envelope) of each kernel input in order."""
    out = []
    for inp in m["inputs"]:
        n = len(inp.get("frac_bits") or inp.get("labels") or inp.get("envelope") or [0])
        env = inp.get("envelope") or [[0.1, 0.9]] * n  # bench.host's default vector range
        out += [(inp["name"], k, e) for k, e in enumerate(env)]
    return out


def states(folder: Path) -> list[dict]:
    """The kernel's motion vectors (at most 16) as {(port, index): value}; [] without one."""
    m = json.loads((folder / "manifest.json").read_text())
    if not (m.get("motion") and (folder / m["motion"]).is_file()):
        return []
    keys = [(port, k) for port, k, _ in _ports(m)]
    return [dict(zip(keys, row)) for row in json.loads((folder / m["motion"]).read_text())["vectors"][:16]]


def instructions(folder: Path, real: str, rows: list[dict], work: Path) -> float | str:
    """x86-64 instructions per call of the kernel in `folder` (callgrind), or why none. Its
    inputs: `rows` by port and index (both commits get the same states though one may have
    dropped a port), each value clamped into the kernel's own envelope (a motion's -2e-32
    for a coordinate fixed at 0 is refused by the input check); an input the rows lack
    gets the middle of its envelope."""
    m = json.loads((folder / "manifest.json").read_text())
    src = (folder / m["sources"][0]).read_text()
    src = src.replace(f'#include "{m["headers"][0]}"', (folder / m["headers"][0]).read_text())
    src += f"\nint bench_kernel(const {real} *in, {real} *out) {{ return {m['function']}(in, out); }}\n"
    ports = _ports(m)
    X = [[min(max(row.get((port, k), (lo + hi) / 2), lo), hi) for port, k, (lo, hi) in ports]
         for row in rows or [{}]]
    if real != "double":  # the words of the kernel's Q formats
        frac = [f for inp in m["inputs"] for f in inp["frac_bits"]]
        X = [[round(v * 2.0 ** f) for v, f in zip(row, frac)] for row in X]
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _callgrind(CKernel("mbforge", src, m["n_in"], m["n_out"]), work, X, real)[0]
    except BenchInputError:
        return "nonzero status on the bench's inputs"


def _flat(x, path: str = ""):
    """(key path with list indices as [], value) of every leaf of a manifest."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _flat(v, f"{path}.{k}")
    elif isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
        for v in x:
            yield from _flat(v, f"{path}[]")
    else:
        yield path, x


def manifest_changes(a: Path, b: Path) -> list[str]:
    """The manifest fields (list indices collapsed) whose values differ, but for the hashes
    and digest that any other change moves."""
    va: dict = {}
    vb: dict = {}
    for folder, vals in ((a, va), (b, vb)):
        for k, v in _flat(json.loads((folder / "manifest.json").read_text())):
            vals.setdefault(k, []).append(v)
    return [k for k in sorted(set(va) | set(vb))
            if va.get(k, "absent") != vb.get(k, "absent") and not k.startswith((".files", ".digest"))]


def run_case(i: int, case, checkouts: dict, tmp: Path) -> dict:
    """One case generated by each checkout, then counted on the same input states (the
    first commit's motion that has one)."""
    name = "/".join(case)
    recs = {side: generate(checkout, case, tmp / side / name, tmp / f"cache-{side}")
            for side, checkout in checkouts.items()}
    made = [side for side in checkouts if "files" in recs[side]]
    if len(made) == 2:
        recs[made[1]]["manifest_changes"] = manifest_changes(*(tmp / side / name for side in made))
    if case[2] in COUNTED:
        rows = next((r for r in (states(tmp / side / name) for side in made) if r), [])
        for side in made:
            # paths as long on both sides: the program's path moves its stack, and with it
            # callgrind's count by a fraction of an instruction per call
            recs[side]["instructions"] = instructions(tmp / side / name, COUNTED[case[2]], rows,
                                                      tmp / "cg" / side[0] / f"{i:03d}")
    return recs


def _cmp(a, b) -> str:
    """'same', 'less' or 'more' of two numbers (b against a); '' when either is missing."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return ""
    return "same" if a == b else "less" if b < a else "more"


def compare(before: dict, after: dict) -> dict:
    """Per case: which files differ, and the operations, bounds and instructions both ways."""
    rows = {}
    for name in before:
        a, b = before[name], after[name]
        fa, fb = a.get("files", {}), b.get("files", {})
        ca, cb = a.get("code", {}), b.get("code", {})
        files = [f"{f} {'missing' if f not in fb else 'new' if f not in fa else 'comments' if f in ca and ca[f] == cb.get(f) else 'differs'}"
                 for f in sorted(set(fa) | set(fb)) if fa.get(f) != fb.get(f)]
        code = "refused" if not (ca or cb) else "same" if ca == cb else "differs"
        if a.get("refused") != b.get("refused"):
            files.insert(0, f"refusal: {a.get('refused')!r} -> {b.get('refused')!r}")
        bounds = {o: _cmp(a.get("bounds", {}).get(o), b.get("bounds", {}).get(o))
                  for o in sorted(set(a.get("bounds", {})) | set(b.get("bounds", {})))}
        rows[name] = {"manifest_changes": b.get("manifest_changes", []), "identical": not files, "code": code, "refusals": [a.get("refused"), b.get("refused")],
                      "differences": files,
                      "ops": [a.get("ops"), b.get("ops")], "ops_change": _cmp(a.get("ops"), b.get("ops")),
                      "bound": [a.get("bound"), b.get("bound")], "bound_change": _cmp(a.get("bound"), b.get("bound")),
                      "bounds_change": bounds,
                      "instructions": [a.get("instructions"), b.get("instructions")],
                      "instructions_change": _cmp(a.get("instructions"), b.get("instructions"))}
    return rows


KINDS = ("byte-identical", "same code", "code differs", "refusal changed", "refused both")


def kind(r: dict) -> str:
    """Which of KINDS a compared case is."""
    ra, rb = r["refusals"]
    if ra or rb:
        return "refused both" if ra == rb else "refusal changed"
    return "byte-identical" if r["identical"] else "same code" if r["code"] == "same" else "code differs"


def summary(rows: dict) -> dict:
    """Per target: how many cases of each kind, bounds tighter or looser, instructions."""
    out: dict = {}
    for name, r in rows.items():
        s = out.setdefault(name.rsplit("/", 1)[1], dict.fromkeys(
            ("cases", *KINDS, "bound tighter", "bound looser", "instr fewer", "instr more"), 0))
        s["cases"] += 1
        s[kind(r)] += 1
        s["bound tighter"] += r["bound_change"] == "less"
        s["bound looser"] += r["bound_change"] == "more"
        s["instr fewer"] += r["instructions_change"] == "less"
        s["instr more"] += r["instructions_change"] == "more"
    return out


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1 else f"{v:.1f}".removesuffix(".0")
    return str(v)


def markdown(rows: dict, summ: dict, seconds: dict) -> str:
    lines = ["| target | " + " | ".join(next(iter(summ.values()))) + " |",
             "|---" * (1 + len(next(iter(summ.values())))) + "|"]
    lines += [f"| {t} | " + " | ".join(str(v) for v in s.values()) + " |" for t, s in summ.items()]
    lines += ["", f"Generation: before {seconds['before']:.0f} s, after {seconds['after']:.0f} s; "
              f"the whole run with the counts {seconds['total']:.0f} s.", "",
              "| case | kind: files that differ | ops before -> after | largest bound before -> after | instr/call before -> after |",
              "|---|---|---|---|---|"]
    for name, r in rows.items():
        what = f"{kind(r)}: " + "; ".join(d if len(d) < 160 else d[:157] + "..." for d in r["differences"])
        pair = lambda k: f"{_fmt(r[k][0])} -> {_fmt(r[k][1])}" if r[k] != [None, None] else "-"  # noqa: E731
        lines.append(f"| {name} | {what} | {pair('ops')} | {pair('bound')} | {pair('instructions')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.before_after", description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, metavar="DIR", help="checkout with its .venv")
    p.add_argument("--after", type=Path, required=True, metavar="DIR", help="checkout with its .venv")
    p.add_argument("--json", type=Path, required=True, metavar="FILE")
    p.add_argument("--md", type=Path, required=True, metavar="FILE")
    p.add_argument("--only", default="", metavar="TEXT", help="only the cases whose name contains TEXT")
    p.add_argument("--keep", type=Path, metavar="DIR", help="generate into DIR (kept, to read the differences)")
    args = p.parse_args(argv)
    for d in (args.before, args.after):
        if not (_venv(d) / "mbforge").is_file():
            p.error(f"{d}: no .venv/bin/mbforge in it")
    for f in (args.json, args.md):
        if not f.resolve().parent.is_dir():
            p.error(f"{f}: its folder does not exist")
    cases = [c for c in case_list(args.before, args.after) if args.only in "/".join(c)]
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    sides: dict = {side: {} for side in checkouts}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        tmp = args.keep or tmp
        for i, case in enumerate(cases):
            for side, rec in run_case(i, case, checkouts, Path(tmp)).items():
                sides[side]["/".join(case)] = rec
                print(f"{side} {'/'.join(case)}: {rec.get('refused') or len(rec['files'])} ({rec['seconds']} s)",
                      file=sys.stderr)
    seconds = {"total": time.monotonic() - t0, **{side: sum(r["seconds"] for r in sides[side].values())
                                                 for side in checkouts}}
    rows = compare(sides["before"], sides["after"])
    summ = summary(rows)
    args.json.write_text(json.dumps({"seconds": seconds, "summary": summ, "cases": rows, "runs": sides},
                                    indent=1, sort_keys=True) + "\n")
    args.md.write_text(markdown(rows, summ, seconds))
    print(markdown(rows, summ, seconds).split("\n\n")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
