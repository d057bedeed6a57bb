"""The benchmarks still run (on the smallest model); their numbers are read, not asserted."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(*args):
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_engine_bench_runs():
    out = _run("bench.engine", "--models", "fourbar", "--repeat", "1", "--no-sympy", "--chain", "4,8")
    assert "casadi" in out and "ops ratio" in out


def test_host_bench_runs():
    out = _run("bench.host", "--models", "fourbar", "--no-sympy", "--repeat", "1")
    assert "ns/call" in out and "casadi" in out


def test_arms_bench_scaling_runs():
    out = _run("bench.arms", "--no-arm", "--chain", "3,6", "--mq", "")
    assert "forward-dynamics-aba: operations grow as N^" in out


@pytest.mark.needs(dists=("example-robot-data",))
def test_urdf_bench_runs(tmp_path):
    """mbforge's side of bench.urdf on the UR5 (host figures) and a 4-joint chain's ABA."""
    out = _run("bench.urdf", "--robots", "ur5", "--no-device", "--no-pinocchio", "--chain", "4",
               "--json", str(tmp_path / "u.json"))
    assert "4-joint chain (URDF): forward-dynamics-aba generated (c-float32)" in out
    rep = json.loads((tmp_path / "u.json").read_text())
    assert [r["mbforge"]["ops"] > 0 for r in rep["ur5"]["rows"].values()] == [True] * 3
    assert rep["chain"]["c-double"] > 0 and "not measured (--no-pinocchio)" in out


@pytest.mark.needs(modules=("pinocchio", "casadi"), dists=("example-robot-data",))
@pytest.mark.parametrize("robot, tol", [("ur5", 1e-9), ("solo12", 1e-6)])
def test_urdf_bench_against_pinocchio_runs(tmp_path, robot, tol):
    """The three kernels of UR5 and of Solo12 on its floating base against Pinocchio through
    CasADi and its own C++ on the host (the device figures are bench.device's machinery,
    run by test_device_bench_runs). About 10 s (UR5) and 45 s (Solo12) once
    bench/pin_export.cpp and pin_time.cpp are compiled (cached; the first compile takes
    minutes). Solo12's URDF allows 1000 rad/s: its accelerations reach 6e6, so 1e-6 absolute
    is 2e-13 relative."""
    out = _run("bench.urdf", "--robots", robot, "--no-device", "--chain", "", "--json", str(tmp_path / "u.json"))
    assert "mbforge / Pinocchio-CasADi: ops" in out
    rep = json.loads((tmp_path / "u.json").read_text())[robot]
    for kname in ("RNEA", "ABA", "CRBA"):
        rows = rep["rows"][kname]
        assert rows["pinocchio"]["max_abs_diff"] < tol, kname  # the same robot on both sides
        assert rows["mbforge"]["ops"] > 0 and rows["pinocchio"]["ops"] > 0
    assert set(rep["pinocchio_cpp_ns"]) == {"RNEA", "ABA", "CRBA"}


def test_step_bench_runs():
    out = _run("bench.step", "--cases", "pendulum", "--tol", "1e-3", "--repeat", "1")
    assert "equal accuracy: mbforge ali3p / MuJoCo" in out and "equal dt" in out
    assert "mbforge's host integrator (scipy DOP853, rtol" in out
    r = subprocess.run([sys.executable, "-m", "bench.step", "--cases", "chain0"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == "step.py: error: --cases: chain: n must be 1 to 50 links, got 0"


@pytest.mark.firmware
def test_device_bench_runs():
    out = _run("bench.device", "--models", "fourbar")
    assert "instr/call" in out and "casadi" in out


def test_two_operand_floor_by_hand():
    """t0 = x*y (overwrites y), t1 = t0 + x (x), t2 = t0*t1 (t0 or t1), t3 = 2 - t2 (its
    first operand is a constant, which is loaded: one copy); outputs t1, t3: 4 + 1 + 2."""
    from bench.host import two_operand_floor
    from mbforge.lower.tape import Instr, Tape

    x, y = ("in", 0), ("in", 1)
    tape = Tape([], [("t", 1), ("t", 3)], [Instr("mul", (0,), (x, y)), Instr("add", (1,), (("t", 0), x)),
                                           Instr("mul", (2,), (("t", 0), ("t", 1))),
                                           Instr("sub", (3,), (("c", 2.0), ("t", 2)))])
    assert two_operand_floor(tape) == {"operations": 4, "copies": 1, "stores": 2, "floor": 7}
    # a value is overwritten once: x + x, then x * y and x - y all need x afterwards but one
    tape = Tape([], [("t", 0), ("t", 1), ("t", 2)], [Instr("sub", (0,), (x, y)), Instr("sub", (1,), (x, ("c", 1.0))),
                                                     Instr("sub", (2,), (x, ("t", 1)))])
    assert two_operand_floor(tape)["copies"] == 2


@pytest.mark.host
def test_two_operand_floor_is_below_what_gcc_makes(tmp_path):
    """The floor bench.host prints is a floor: the Stewart joint kernel compiled by gcc -O2
    takes at least that many instructions per call (callgrind; 9,569 against 12,070 with
    its checks). The small kernels are no test of it: checks and libm's sin and cos are
    most of their instructions."""
    from bench import generic
    from bench.backends import BACKENDS
    from bench.cbuild import mbforge_kernel
    from bench.host import callgrind_instructions, two_operand_floor

    r = BACKENDS["mbforge"]().joint(generic.stewart)
    f = two_operand_floor(r.extra["kernel"].tape())
    got = callgrind_instructions(mbforge_kernel(r.extra["plan"]), tmp_path)
    assert f["operations"] + f["stores"] < f["floor"] <= got, (f, got)


@pytest.mark.host
def test_host_figures_refuse_a_kernel_that_returns_early(tmp_path):
    """A kernel that returns status 2 at once (inputs outside its envelope) times nothing:
    bench.host refuses the figure instead of printing it (bench.arms and bench.idyn timed
    such early returns before their inputs came from the kernels' envelopes)."""
    from bench.cbuild import mbforge_kernel
    from bench import BenchInputError
    from bench.host import callgrind_instructions, time_ns
    from mbforge.examples import load
    from mbforge.verify import vectors
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    plan = generate(build_kernel(load("fourbar").equations(), "kinematics"), "c-double")
    plan.write(tmp_path / "k")
    k = mbforge_kernel(plan)
    inside = vectors.draw(plan.manifest, tmp_path / "k", 8, seed=2, motion=False)
    assert callgrind_instructions(k, tmp_path, inside) > 0 and time_ns(k, tmp_path, 1, inside) > 0
    outside = inside + 100.0
    with pytest.raises(BenchInputError, match="nonzero status"):
        callgrind_instructions(k, tmp_path, outside)
    with pytest.raises(BenchInputError, match="nonzero status"):
        time_ns(k, tmp_path, 1, outside)


@pytest.mark.parametrize("argv, message", [
    (["bench.host", "--models", "nope"], "--models: no model called nope; known: fourbar, slidercrank, stewart"),
    (["bench.device", "--models", ","], "--models: no model called (empty)"),
    (["bench.engine", "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: its folder does not exist"),
    (["bench.arms", "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: its folder does not exist"),
    (["bench.idyn", "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: its folder does not exist"),
    (["bench.urdf", "--robots", "ur5,nope"], "--robots: no robot called nope; known: ur5, panda, solo12"),
    (["bench.urdf", "--chain", "x"], "--chain: a number of joints, 2 or more, got 'x'"),
    (["bench.box_scaling", "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: its folder does not exist"),
    (["bench.box_scaling", "--fractions", "0.5", "0"], "--fractions: each in (0, 1]"),
    (["bench.bound_ratios", "--examples", "fourbar,nope"], "--examples: no example called nope; known: andrews"),
    (["bench.bound_ratios", "--kernels", "bogus"], "--kernels: no kernel called bogus; known: equations"),
    (["bench.bound_ratios", "--states", "0"], "--states must be at least 1"),
    (["bench.bound_ratios", "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: its folder does not exist"),
])
def test_bench_commands_refuse_bad_arguments_up_front(argv, message):
    """A wrong --models or a --json into a missing folder: exit 2 and one error line before
    any work (the second used to fail after minutes, the first with a traceback)."""
    r = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in r.stderr


def test_box_scaling_bounds_stay_above_the_floor(tmp_path):
    """bench.box_scaling on two states of the Stewart reduced kernel: each box's float32
    bound is at least the floor over the box (no sound bound is below it), and shrinking
    the boxes brings it closer."""
    out = tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "bench.box_scaling", "--states", "2", "--fractions", "0.5", "0.125",
                        "--samples", "50", "--timing", "2", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["fraction"] for row in rows] == [0.5, 0.125]
    assert all(row["bound_over_floor_min"] >= 1.0 for row in rows)
    assert rows[1]["bound_over_floor_max"] < rows[0]["bound_over_floor_max"]


def test_cluster_timing_bench_runs(tmp_path):
    """bench.cluster_timing on the four-bar: every configuration (one process, the local
    default, an existing cluster of one worker) writes the same bytes (its exit status)."""
    out = _run("bench.cluster_timing", "--model", "fourbar", "--kernel", "kinematics", "--targets", "c-fixed",
               "--workers", "1", "--json", str(tmp_path / "t.json"))
    rows = json.loads((tmp_path / "t.json").read_text())
    assert len(rows) == 3 and all(r["same_bytes"] for r in rows), out


def test_golden_check_names_every_file_that_moved(tmp_path):
    """bench.golden: the same command hashes alike twice; a changed, a missing and a new
    file are each a line, and a refusal is recorded as one."""
    from bench import golden

    a = golden._run(["generate", "fourbar", "--target", "c-double"], tmp_path / "a")
    b = golden._run(["generate", "fourbar", "--target", "c-double"], tmp_path / "b")
    assert "manifest.json" in a and "fourbar.c" in a and a == b
    moved = {**{k: v for k, v in b.items() if k != "manifest.json"}, "fourbar.c": "0" * 64, "new.txt": "1" * 64}
    assert golden.differences({"x": a}, {"x": moved}) == [
        "x: fourbar.c differs", "x: manifest.json missing", "x: new.txt new"]
    assert golden.differences({"x": a}, {"x": b}) == []
    assert list(golden._run(["generate", "no_such_example"], tmp_path / "c")) == ["<refused>"]


def test_bound_ratios_bench_runs(tmp_path):
    """bench.bound_ratios on the four-bar's kinematics and the slider-crank's linearized
    dynamics: ratios of at least 1 (a bound below an observed error exits 1), the envelope
    kernel judged at its consistent states, a pair not applicable left out."""
    out = _run("bench.bound_ratios", "--examples", "fourbar,slidercrank", "--kernels",
               "kinematics,linearized-dynamics", "--states", "500", "--json", str(tmp_path / "r.json"))
    rows = json.loads((tmp_path / "r.json").read_text())
    got = {(r["target"], r["pair"]): r for r in rows}
    assert set(got) == {(t, p) for t in ("c-float32", "c-fixed")
                        for p in ("fourbar kinematics", "slidercrank kinematics", "slidercrank linearized-dynamics")}
    ld = got["c-fixed", "slidercrank linearized-dynamics"]
    assert ld["how"] == "envelope states" and ld["states"] > 450 and ld["worst"] >= 1.0 and not ld["beyond"]
    assert "slidercrank linearized-dynamics" in out
