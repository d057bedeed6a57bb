"""Robots from URDF (issue 28, item 4): mbforge's RNEA, ABA and CRBA against Pinocchio.

UR5, Panda and Solo12 (on a floating base: from_urdf(floating=True), Pinocchio's
JointModelFreeFlyer root) of example-robot-data (PyPI), each read by both from the same
file: mbforge.model.from_urdf, and Pinocchio's URDF parser. Pinocchio's algorithms become C
through CasADi's code generator, as in bench.arms (the pin wheel has no pinocchio.casadi:
bench/pin_export.cpp evaluates Pinocchio's C++ templates with casadi::SX scalars on the
model Pinocchio read), wrapped in an SX function over mbforge's input layout (coordinates
matched by name; M in mbforge's sparse pattern, Pinocchio's upper triangle mirrored):
permutations and copies, no operation. Figures, per robot and algorithm:
- operations (+ - * / and calls, sin and cos one each, after dead-code elimination):
  manifest counts for mbforge, CasADi's instruction list for Pinocchio;
- instructions per call on the emulated Cortex-M4F in float32 (QEMU -icount, the same
  firmware and flags for both; CasADi's C with casadi_real=float, sinf/cosf), flash, stack;
- host ns per call (gcc -O2, double) of both generated C files and of Pinocchio's own C++
  (bench/pin_time.cpp, gcc -O2 -DNDEBUG, on the same states);
- the two generated C files agree (double) on states of the kernels' envelope;
- generation time of the three kernels: mbforge from the URDF to the c-float32 C (cold
  cache, the error-bound analysis included), against the CasADi route (Pinocchio's SX evaluation in the exporter, CasADi's
  code generation; the exporter's one-off compile not counted);
and the generation time of a 30-joint chain's forward-dynamics-aba (URDF written here,
from_urdf, kernel, C) in c-double and c-float32 against the goal of 5 s. Times are CPU
seconds of the process and its children (the exporter, the analysis' forked pieces):
steadier than wall time on a shared machine, and no smaller than it on one core.

    python -m bench.urdf [--robots ur5,panda,solo12] [--no-device] [--no-pinocchio] [--chain 30] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import numpy as np

from . import check_json, run
from .arms import HERE, _agree, _device, casadi_c, casadi_ops, pin_binary, pinocchio_functions, port_offsets
from .cbuild import mbforge_kernel

ROBOTS = {"ur5": "ur_description/urdf/ur5_robot.urdf", "panda": "panda_description/urdf/panda.urdf",
          "solo12": "solo_description/robots/solo12.urdf"}
FLOATING = {"solo12"}  # read on a free-flying base by both
KERNELS = {"RNEA": "inverse-dynamics-rnea", "ABA": "forward-dynamics-aba", "CRBA": "mass-matrix-crba"}
GOAL_RATIO, GOAL_CHAIN_S = 0.6, 5.0


def cpu_s() -> float:
    """CPU seconds so far of this process and its waited-for children."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def robot_urdf(name: str) -> Path:
    """The robot's URDF in the example-robot-data wheel."""
    try:
        return Path(distribution("example-robot-data").locate_file(
            f"cmeel.prefix/share/example-robot-data/robots/{ROBOTS[name]}"))
    except PackageNotFoundError:
        raise SystemExit("bench.urdf: example-robot-data is not installed (pip install example-robot-data)") from None


def chain_urdf(n: int) -> str:
    """An n-joint serial chain: revolute joints about z, y, x in turn, offset links with
    turned inertials (no structure a generator could exploit beyond the tree)."""
    links = ['  <link name="base"/>']
    joints = []
    for i in range(n):
        axis = ("0 0 1", "0 1 0", "1 0 0")[i % 3]
        links.append(f'  <link name="l{i}"><inertial><origin xyz="0.02 0.01 0.1" rpy="0.1 0.2 0.3"/>'
                     f'<mass value="{1.0 + 0.1 * i:g}"/><inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.02" '
                     f'iyz="0.002" izz="0.01"/></inertial></link>')
        joints.append(f'  <joint name="j{i}" type="revolute"><parent link="{"base" if i == 0 else f"l{i - 1}"}"/>'
                      f'<child link="l{i}"/><origin xyz="0 0.05 0.2"/><axis xyz="{axis}"/>'
                      f'<limit lower="-2" upper="2" effort="50" velocity="3"/></joint>')
    return f'<robot name="chain{n}">\n' + "\n".join(links + joints) + "\n</robot>\n"


def _pin_index(urdf: Path, model):
    """(Pinocchio's model, iq, iv): Pinocchio's configuration index of each of mbforge's
    configuration numbers and its tangent index of each velocity (a floating base's first,
    in the same convention; joints matched by name)."""
    import pinocchio as pin

    floating = model.floating_base is not None
    pm = pin.buildModelFromUrdf(str(urdf), *([pin.JointModelFreeFlyer()] if floating else []))
    joints = [pm.joints[pm.getJointId(q.value.name)] for q in model.q]
    if pm.nq != pm.nv + floating:
        raise SystemExit(f"bench.urdf: {urdf.name}: a continuous joint (Pinocchio's cos, sin) is not benched")
    return (pm, list(range(7 * floating)) + [j.idx_q for j in joints],
            list(range(6 * floating)) + [j.idx_v for j in joints])


def _pin_wrappers(funcs, urdf: Path, model, kernels) -> dict:
    """Pinocchio's CasADi functions over mbforge's input vector (one input, mbforge's layout)
    and outputs (its order; M in the kernel's sparse pattern): {name: Function}. ABA's base
    wrench (floating base) is zero, as mbforge's."""
    import casadi as ca

    pm, iq, iv = _pin_index(urdf, model)

    def pin_order(v, index, size):  # Pinocchio's vector from mbforge's (zeros where mbforge has none)
        at = {i: k for k, i in enumerate(index)}
        return ca.vertcat(*[v[at[i]] if i in at else ca.SX(0) for i in range(size)])

    out = {}
    for kname, f in zip(("RNEA", "ABA", "CRBA"), funcs):
        k = kernels[kname]
        X = ca.SX.sym("x", len(k.input_symbols))
        o = port_offsets(k)
        port = {p.name: X[o[p.name]:o[p.name] + len(p.symbols)] for p in k.inputs if p.name != "t"}
        q = pin_order(port["q"], iq, pm.nq)
        if kname == "CRBA":  # q -> the pattern's entries
            M = f(q)
            y = ca.vertcat(*[M[iv[i], iv[j]] for i, j in k.outputs[0].pattern])
        else:  # RNEA (q, qd, qdd), ABA (q, qd, u: the joints' only)
            joints = iv[len(iv) - len(model.q):]  # u: the joints' forces
            w = pin_order(port["qdd"], iv, pm.nv) if kname == "RNEA" else pin_order(port["u"], joints, pm.nv)
            y = f(q, pin_order(port["qd"], iv, pm.nv), w)
            y = ca.vertcat(*[y[i] for i in iv])
        out[kname] = ca.Function(f"pin_{kname.lower()}", [X], [y], {"cse": True})
    return out


def pin_time_program():
    """(command line of bench/pin_time.cpp compiled, "") or (None, why not): Pinocchio's own C++."""
    return pin_binary(HERE / "pin_time.cpp", ["-O2", "-DNDEBUG"], "", "Pinocchio's own RNEA, ABA and CRBA")


def _pin_native_ns(urdf: Path, model, kernel, X: np.ndarray, work: Path) -> dict | str:
    """Pinocchio's own C++ (double, gcc -O2): ns per call of rnea, aba, crba on the rows of X
    (inputs of the RNEA `kernel`, reordered), or the reason it is not measured."""
    import pinocchio as pin

    cmd, why = pin_time_program()
    if cmd is None:
        return why
    pm, iq, iv = _pin_index(urdf, model)
    pm.saveToText(str(work / "pin_model.txt"))
    o = port_offsets(kernel)

    def pin_order(v, index, size):
        out = np.zeros(size)
        out[index] = v
        return out

    rows = [np.concatenate([pin_order(x[o[p]:o[p] + len(index)], index, size)
                            for p, index, size in (("q", iq, pm.nq), ("qd", iv, pm.nv), ("qdd", iv, pm.nv))])
            for x in X]
    np.savetxt(work / "states.txt", np.array(rows), fmt="%.17g")
    best: dict = {}
    for _ in range(3):  # best of three runs, as time_ns takes the best of its repeats
        out = subprocess.run([*cmd, str(work / "pin_model.txt"), str(work / "states.txt"), "2000"],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            k, ns = line.split()
            best[k.upper()] = min(float(ns), best.get(k.upper(), np.inf))
    return best


def _unit_quaternions(model, X: np.ndarray) -> np.ndarray:
    """X with a floating base's quaternion (inputs 3 to 6) scaled to unit length, as
    Pinocchio takes it; X as it is for a fixed base."""
    if model.floating_base is None:
        return X
    X = X.copy()
    X[:, 3:7] /= np.linalg.norm(X[:, 3:7], axis=1, keepdims=True)
    return X


def robot_rows(name: str, device: bool, pinocchio: bool = True) -> dict:
    """Every figure of one robot (module docstring)."""
    from mbforge.verify import vectors
    from mbforge.kernels.builders import build_kernel
    from mbforge.model import from_urdf
    from mbforge.pipeline import generate

    from .host import time_ns

    urdf = robot_urdf(name)
    t0 = cpu_s()
    model = from_urdf(urdf, floating=name in FLOATING)
    kernels = {k: build_kernel(model, kn) for k, kn in KERNELS.items()}
    plans_f = {k: generate(kern, "c-float32") for k, kern in kernels.items()}
    report: dict = {"generate_s": {"mbforge": cpu_s() - t0}, "rows": {}}
    plans_d = {k: generate(kern, "c-double") for k, kern in kernels.items()}  # for the host figures
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = cpu_s()
        funcs, why = (pinocchio_functions(tmp, urdf, name in FLOATING) if pinocchio
                      else (None, "not measured (--no-pinocchio)"))
        pin = _pin_wrappers(funcs, urdf, model, kernels) if funcs else {}
        pin_c = {k: casadi_c(f, "float", (0,), f.nnz_in(0)) for k, f in pin.items()}
        if pin:
            report["generate_s"]["pinocchio"] = cpu_s() - t0
        report["pinocchio"] = why
        states = {}
        for kname, k in kernels.items():
            plan_d = plans_d[kname]
            plan_d.write(tmp / f"{kname}_k64")
            X = _unit_quaternions(model, vectors.draw(plan_d.manifest, tmp / f"{kname}_k64", 64, seed=1, motion=False))
            states[kname] = X
            ops = plans_f[kname].manifest.ops  # float32: the code the M4F runs
            rows = {"mbforge": {"ops": ops["total"] + ops.get("sincos", 0), "kernel": mbforge_kernel(plan_d),
                                "kernel_f": mbforge_kernel(plans_f[kname], real="float")}}
            if pin:
                f = pin[kname]
                rows["pinocchio"] = {"ops": casadi_ops(f), "kernel": casadi_c(f, "double", (0,), f.nnz_in(0)),
                                     "kernel_f": pin_c[kname]}
            for e, r in rows.items():
                d = tmp / f"{kname}_{e}"
                d.mkdir()
                r["host_ns"] = time_ns(r["kernel"], d, 3, X)
            if pin:
                rows["pinocchio"]["max_abs_diff"] = _agree(rows, kname, tmp, X)
            if device:
                _device(rows, kname, tmp, X[:16].astype(np.float32), label=name)
            report["rows"][kname] = {e: {x: v for x, v in r.items() if x not in ("kernel", "kernel_f")}
                                     for e, r in rows.items()}
        if pin:
            report["pinocchio_cpp_ns"] = _pin_native_ns(urdf, model, kernels["RNEA"], states["RNEA"], tmp)
    return report


def chain_generation(n: int, work: Path, target: str) -> float:
    """CPU seconds from an n-joint URDF on disk to its forward-dynamics-aba C in `target`."""
    from mbforge.kernels.builders import build_kernel
    from mbforge.model import from_urdf
    from mbforge.pipeline import generate

    path = work / f"chain{n}.urdf"
    path.write_text(chain_urdf(n))
    t0 = cpu_s()
    generate(build_kernel(from_urdf(path), "forward-dynamics-aba"), target)
    return cpu_s() - t0


def _print(name: str, rep: dict) -> None:
    print(f"\n{name}: {rep['pinocchio'] or 'Pinocchio through CasADi (casadi::SX evaluation, cse)'}")
    hdr = f"{'kernel':<6} {'engine':<10} {'ops':>6} {'host ns':>8} {'M4F instr':>10} {'flash':>6} {'stack':>6}"
    print(hdr)
    print("-" * len(hdr))
    native = rep.get("pinocchio_cpp_ns", {})
    for kname, rows in rep["rows"].items():
        for e, r in rows.items():
            dev = (f"{r['instructions_median']:>10.0f} {r['flash']:>6} {r['stack']:>6}"
                   if "instructions_median" in r else f"{'-':>10} {'-':>6} {'-':>6}")
            print(f"{kname if e == 'mbforge' else '':<6} {e:<10} {r['ops']:>6} {r['host_ns']:>8.1f} {dev}")
        if isinstance(native, dict) and kname in native:
            print(f"{'':<6} {'pin C++':<10} {'':>6} {native[kname]:>8.1f}")
        if "pinocchio" in rows:
            a, b = rows["mbforge"], rows["pinocchio"]
            ratio = f"ops {a['ops'] / b['ops']:.2f}, host ns {a['host_ns'] / b['host_ns']:.2f}"
            if "instructions_median" in a and "instructions_median" in b:
                r = a["instructions_median"] / b["instructions_median"]
                rows["ratio_m4f"] = r
                ratio += f", M4F instr {r:.2f} (goal <= {GOAL_RATIO}: {'met' if r <= GOAL_RATIO else 'NOT met'})"
            print(f"{'':<6} mbforge / Pinocchio-CasADi: {ratio}; outputs agree to {b['max_abs_diff']:.1e}")
    if isinstance(native, str):
        print(f"Pinocchio's C++: {native}")
    g = rep["generate_s"]
    line = f"generation of the three kernels (CPU): mbforge {g['mbforge']:.2f} s (c-float32, with its error bounds)"
    if "pinocchio" in g:
        line += f", CasADi route {g['pinocchio']:.2f} s (mbforge / CasADi {g['mbforge'] / g['pinocchio']:.2f})"
    print(line)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", default="ur5,panda,solo12", help=f"of {', '.join(ROBOTS)} (empty: none)")
    ap.add_argument("--no-device", action="store_true", help="skip the emulated Cortex-M4F")
    ap.add_argument("--no-pinocchio", action="store_true", help="mbforge's figures only (no exporter to compile)")
    ap.add_argument("--chain", default="30", help="joints of the chain whose ABA generation is timed (empty: skip)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_json(ap, args.json)
    robots = [r for r in args.robots.split(",") if r]
    if any(r not in ROBOTS for r in robots):
        ap.error(f"--robots: no robot called {', '.join(r for r in robots if r not in ROBOTS)}; "
                 f"known: {', '.join(ROBOTS)}")
    try:
        chain = int(args.chain) if args.chain else 0
    except ValueError:
        chain = -1
    if chain < 0 or chain == 1:
        ap.error(f"--chain: a number of joints, 2 or more, got {args.chain!r}")
    os.environ["MBFORGE_CACHE_DIR"] = "off"  # generation times of a cold start; no cached analysis
    report: dict = {}
    for r in robots:
        report[r] = robot_rows(r, not args.no_device, not args.no_pinocchio)
        _print(r, report[r])
    if chain:
        report["chain"] = {"joints": chain}
        for target in ("c-double", "c-float32"):
            with tempfile.TemporaryDirectory() as tmp:
                s = chain_generation(chain, Path(tmp), target)
            report["chain"][target] = s
            print(f"{chr(10) if target == 'c-double' else ''}{chain}-joint chain (URDF): forward-dynamics-aba "
                  f"generated ({target}) in {s:.2f} CPU s (goal < {GOAL_CHAIN_S:g} s: "
                  f"{'met' if s < GOAL_CHAIN_S else 'NOT met'})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    run("urdf", main)
