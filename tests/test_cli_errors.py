"""Every mistake a user can make at the command line gives one line and a non-zero exit:
no traceback, nothing half-written (issue: a user's first contact is a command line).
Each case runs the real `mbforge` in a fresh process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "toy"
TOY_DOUBLE = ROOT / "tests" / "fixtures" / "toy_double"


def mbforge(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def one_line(r, code: int = 2) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    files = {
        "syntax.py": "def build(:\n",
        "name.py": "def build():\n    return undefined_thing\n",
        "nomodel.py": "def build():\n    return 42\n",
        "redundant.py": ("from mbforge.model import Model\n"
                         "def build():\n"
                         "    m = Model('red')\n"
                         "    x = m.coordinate('x', guess=0.5, range=(-2, 2))\n"
                         "    m.constraint(x - 1.0, 'c1')\n"
                         "    m.constraint(2.0 * x - 2.0, 'c2')\n"
                         "    return m\n"),
        "unassemblable.py": ("from mbforge.model import Model\n"
                             "def build():\n"
                             "    m = Model('far')\n"
                             "    x = m.coordinate('x', guess=0.0, range=(-2, 2))\n"
                             "    m.constraint(x * x + 1.0, 'never')\n"
                             "    return m\n"),
    }
    for name, text in files.items():
        (d / name).write_text(text)
    return d


@pytest.mark.parametrize("name, words", [
    ("syntax.py", "syntax error at line 1"),
    ("name.py", "NameError"),
    ("nomodel.py", "returned int, not a Model"),
])
def test_generate_of_a_broken_model_file(model_files, tmp_path, name, words):
    line = one_line(mbforge("generate", model_files / name, "--out", tmp_path / "o"))
    assert words in line and name in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["redundant.py", "unassemblable.py"])
def test_generate_of_a_model_that_cannot_assemble(model_files, tmp_path, name):
    line = one_line(mbforge("generate", model_files / name, "--kernel", "kinematics", "--out", tmp_path / "o"))
    assert line.startswith("mbforge generate: error: ")
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_generate_out_is_a_file_below_a_file_or_unwritable(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert "is a file, not a folder" in one_line(mbforge("generate", "fourbar", "--out", f))
    assert "is a file, not a folder" in one_line(mbforge("generate", "fourbar", "--out", f / "below"))
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(0o500)
        assert "cannot write" in one_line(mbforge("generate", "fourbar", "--out", ro / "k"))
    (tmp_path / "k" / "manifest.json").mkdir(parents=True)
    line = one_line(mbforge("generate", "fourbar", "--out", tmp_path / "k"))
    assert "not empty" in line and "--force" in line  # a folder holding no kernel
    line = one_line(mbforge("generate", "fourbar", "--out", tmp_path / "k", "--force"))
    assert "manifest.json is a folder" in line
    assert not (tmp_path / "k" / "fourbar.c").exists()  # nothing half-written


def test_generate_prefix_must_be_a_c_identifier(tmp_path):
    line = one_line(mbforge("generate", "fourbar", "--prefix", "1bad-name;", "--out", tmp_path / "o"))
    assert "--prefix '1bad-name;' is not a C identifier" in line
    assert "not a C identifier" in one_line(mbforge("generate", "fourbar", "--prefix", "int", "--out", tmp_path / "o"))
    assert not (tmp_path / "o").exists()


def test_generate_set_of_an_unknown_option(tmp_path):
    line = one_line(mbforge("generate", "stewart", "--set", "speed=3", "--out", tmp_path / "o"))
    assert "takes no option speed (--set); its options: motion" in line
    r = mbforge("generate", "stewart", "--set", "motion='yaw'", "--kernel", "inverse-dynamics-reduced",
                "--out", tmp_path / "yaw")
    assert r.returncode == 0, r.stderr


def test_firmware_out_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    line = one_line(mbforge("firmware", "--kernel", TOY, "--out", f))
    assert "is a file, not a folder" in line


@pytest.mark.parametrize("args, words", [
    (["--vectors", "-5"], "--vectors must be a whole number from 0 to 1000000"),
    (["--tol", "nan"], "--tol must be a positive number"),
    (["--tol", "-1"], "--tol must be a positive number"),
    (["--port", "socket://127.0.0.1:99999"], "PORT from 1 to 65535"),
])
def test_hil_bad_options(tmp_path, args, words):
    base = ["hil", "--kernel", TOY, "--reference", TOY_DOUBLE]
    if "--port" not in args:
        base += ["--port", "socket://127.0.0.1:9"]
    line = one_line(mbforge(*base, *args, cwd=tmp_path))
    assert words in line
    assert not list(tmp_path.glob("*.sqlite"))


def test_hil_json_into_a_missing_folder(tmp_path):
    line = one_line(mbforge("hil", "--port", "socket://127.0.0.1:9", "--kernel", TOY, "--reference", TOY_DOUBLE,
                            "--json", tmp_path / "no" / "r.json", cwd=tmp_path))
    assert "does not exist" in line


def test_simulate_of_an_unassemblable_model(model_files, tmp_path):
    line = one_line(mbforge("simulate", model_files / "unassemblable.py", "--out", tmp_path / "s"))
    assert line.startswith("mbforge simulate: error: ")


@pytest.mark.firmware  # runs QEMU
def test_hil_emulate_an_image_that_is_no_firmware(tmp_path):
    """QEMU's own last words (a lockup) reach the one error line."""
    line = one_line(mbforge("hil", "--emulate", "/bin/true", "--kernel", TOY, "--reference", TOY_DOUBLE,
                            "--timeout", "2", cwd=tmp_path))
    assert "QEMU exited" in line and "Lockup" in line


def test_float_outputs_that_vanish_on_consistent_states_pass_within_their_bound(tmp_path):
    """Only the motion's (consistent) vectors: Phi is ~1e-7 there, so 1e-5 of its own scale
    is below float32's rounding; each element within the manifest's sound float32 bound
    passes, and an error beyond it still fails."""
    from mbforge.examples import load
    from mbforge.verify import hostlib
    from mbforge.verify.compare import compare
    from mbforge.verify.device import Evaluation
    from mbforge.verify.vectors import from_raw, to_raw
    from mbforge.kernels.builders import build_kernel
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate

    k = build_kernel(load("fourbar").equations(), "equations")
    for t in ("c-float32", "c-double"):
        generate(k, t).write(tmp_path / t)
    m = Manifest.load(tmp_path / "c-float32")
    X = np.array(k.motion)
    X_dev = to_raw(m, X)
    dev = hostlib.load_kernel(tmp_path / "c-float32").eval(X_dev)
    ref = hostlib.load_kernel(tmp_path / "c-double").eval(from_raw(m, X_dev, "inputs"))
    phi = next(g for g in compare(m, dev, ref=ref).groups if g.name == "Phi")
    assert phi.passed and phi.max_rel_error > 1e-5 and phi.tolerance_kind == "relative_or_bound"
    g = m.outputs[0]
    worse = dev.outputs.copy()
    worse[:, g.offset] += np.float32(10 * g.error_bound[0])
    phi = next(g for g in compare(m, Evaluation(worse, dev.status, None), ref=ref).groups if g.name == "Phi")
    assert not phi.passed


def test_every_option_of_every_command_has_help():
    import argparse

    from mbforge.cli import build_parser

    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    assert {"generate", "firmware", "hil", "simulate", "hdl", "demo"} <= set(sub.choices)
    for name, p in sub.choices.items():
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            assert a.help, f"mbforge {name} {a.option_strings or a.dest} has no help text"


def test_demo_bad_options(tmp_path):
    assert "takes no option speed (--set)" in one_line(mbforge("demo", "--set", "speed=2"))
    assert "does not exist" in one_line(mbforge("demo", "--json", tmp_path / "no" / "r.json"))
    f = tmp_path / "f"
    f.write_text("x")
    assert "is a file, not a folder" in one_line(mbforge("demo", "--out", f))


def test_ctrl_c_during_simulate_is_one_line(tmp_path):
    """SIGINT in the middle of a long run: one line, exit 130, no traceback."""
    import signal
    import time

    # as from a terminal: SIGINT at its default in the child, even when this test runs in a
    # background job (which ignores SIGINT, and a child inherits an ignored signal)
    proc = subprocess.Popen([sys.executable, "-m", "mbforge.cli", "simulate", "pendulum_block", "--out",
                             str(tmp_path / "s"), "--points", "200001", "--t-end", "2000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # "in the middle": once the run has used 4 s of CPU (a loaded machine starts it slowly)
    tick = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    for _ in range(900):
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        if cpu >= 4.0 or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert proc.poll() is None, f"simulate ended before the signal: {proc.communicate()}"
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no exit 60 s after SIGINT (signalled at {cpu:.1f} s CPU); stderr: {err[-2000:]}")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip() == "mbforge simulate: interrupted"


def _generate_in_pieces(tmp_path, pieces: int, model=("stewart", "--kernel", "inverse-dynamics-reduced"), **env):
    """`generate` of a kernel (the Stewart reduced one by default) in c-fixed with
    MBFORGE_JOBS=2, once at least `pieces` worker processes of its local cluster
    (analysis.parallel) run: (process, their pids, --out)."""
    import time

    env = dict(os.environ, MBFORGE_CACHE_DIR=str(tmp_path / "cache"), MBFORGE_JOBS="2", **env)
    out = tmp_path / "k"
    proc = subprocess.Popen([sys.executable, "-m", "mbforge.cli", "generate", *model, "--target",
                             "c-fixed", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    children: list[int] = []
    for _ in range(3600):
        try:
            # the nannies start their workers from dask's own thread: every thread's children
            kids = [x for t in Path(f"/proc/{proc.pid}/task").iterdir() for x in (t / "children").read_text().split()]
            children = [int(x) for x in kids
                        if b"spawn_main" in Path(f"/proc/{x}/cmdline").read_bytes()]  # not the resource tracker
        except OSError:
            children = []
        if len(children) >= pieces or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert len(children) >= pieces, f"no pieces in children before the end: {proc.communicate()}"
    return proc, children, out


@pytest.mark.firmware
def test_ctrl_c_while_simulate_device_compiles_its_budget_is_one_line(tmp_path):
    """SIGINT while `simulate --device` builds the firmware and compiles the kernel's budget
    beside it (a thread), sent to the process group as a terminal sends it: one line, exit
    130, and the budget's compiler ends with the command (it once added a 'no budget: does not
    compile' note for the compiler it saw interrupted)."""
    import signal
    import time

    env = dict(os.environ, MBFORGE_CACHE_DIR=str(tmp_path / "cache"))  # the budget not cached: compiled
    proc = subprocess.Popen([sys.executable, "-m", "mbforge.cli", "simulate", "nfourbar", "--set", "n=2", "--set",
                             "swing=0.5", "--device", "emulated_microbit", "--target", "c-fixed", "--dt", "0.01",
                             "--integrator", "rk4", "--penalty", "0", "--t-end", "1", "--out", str(tmp_path / "s")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True,  # its own process group, which a terminal's Ctrl-C signals
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _await_budget_compiler(proc)
    os.killpg(proc.pid, signal.SIGINT)  # the command, the PlatformIO build and the budget's compiler
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"no exit 120 s after SIGINT: {proc.communicate()[1][-2000:]}")
    assert proc.returncode == 130 and err.strip() == "mbforge simulate: interrupted", err
    assert _budget_compilers() == []


def _budget_compilers() -> list[int]:
    """The running compilers of firmware.budget (their objects go to an mbf_budget_ folder)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and b"mbf_budget_" in (d / "cmdline").read_bytes() \
                    and (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(d.name))
        except OSError:
            pass
    return found


def _await_budget_compiler(proc) -> None:
    """Until a budget compiler runs (AssertionError if the command ends first)."""
    import time

    for _ in range(1200):
        if _budget_compilers() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert _budget_compilers() and proc.poll() is None, f"no budget compile seen: {proc.communicate()}"


@pytest.mark.firmware
def test_ctrl_c_while_firmware_compiles_the_budgets_ends_at_once(tmp_path):
    """SIGINT (to the process group, as a terminal sends it) while `firmware` compiles the
    kernel for each core side by side: one line, exit 130, and the cores not started yet are
    not compiled after it (it once went on for 15 s, compiling them one by one)."""
    import signal
    import time

    env = dict(os.environ, MBFORGE_CACHE_DIR=str(tmp_path / "cache"))
    kernel = tmp_path / "k"  # five cores, a few seconds of gcc each
    subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "nfourbar", "--set", "n=2", "--set", "swing=0.5",
                    "--kernel", "step", "--dt", "0.01", "--integrator", "rk4", "--penalty", "0", "--target", "c-fixed",
                    "--out", str(kernel)], check=True, capture_output=True, env=env)
    proc = subprocess.Popen([sys.executable, "-m", "mbforge.cli", "firmware", "--kernel", str(kernel), "--env",
                             "emulated_f405", "--out", str(tmp_path / "fw")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _await_budget_compiler(proc)
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"no exit 120 s after SIGINT: {proc.communicate()[1][-2000:]}")
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "mbforge firmware: interrupted", err
    assert "Traceback" not in err and "no budget" not in err
    assert time.monotonic() - t0 < 5, "the remaining cores were compiled after the interrupt"
    assert _budget_compilers() == [] and not (tmp_path / "fw").exists()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _assert_pieces_ended(children: list[int]) -> None:
    """No worker process is left running within 10 s of the command's end."""
    import time

    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [c for c in children if Path(f"/proc/{c}").exists()
             and Path(f"/proc/{c}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not alive, f"pieces still running after the command ended: {alive}"


def test_sigterm_while_pieces_run_in_children_is_one_line_and_ends_them(tmp_path):
    """SIGTERM to `generate` while its analysis runs on a local cluster (analysis.parallel;
    MBFORGE_LOCAL_WORK=0 sends the delta's forward dynamics' passes there too): one line, exit 143,
    nothing written, and no worker process outlives it."""
    import signal

    delta = ("delta", "--set", "workspace=first", "--kernel", "forward-dynamics")
    proc, children, out = _generate_in_pieces(tmp_path, 1, delta, MBFORGE_LOCAL_WORK="0")
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"no exit 60 s after SIGTERM: {proc.communicate()[1][-2000:]}")
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip() == "mbforge generate: interrupted (SIGTERM)"
    assert not out.exists()
    _assert_pieces_ended(children)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_bad_mbforge_jobs_is_one_line_before_anything_runs(tmp_path, monkeypatch, value):
    monkeypatch.setenv("MBFORGE_JOBS", value)
    out = tmp_path / "k"
    line = one_line(mbforge("generate", "fourbar", "--kernel", "kinematics", "--target", "c-double", "--out", out))
    assert line == f"mbforge generate: error: MBFORGE_JOBS: expected a whole number of processes, 1 or more; got {value!r}"
    assert not out.exists()


@pytest.mark.parametrize("value", ["abc", "-2", "1e6"])
def test_a_bad_mbforge_local_work_is_one_line_before_anything_runs(tmp_path, monkeypatch, value):
    monkeypatch.setenv("MBFORGE_LOCAL_WORK", value)
    out = tmp_path / "k"
    line = one_line(mbforge("generate", "fourbar", "--kernel", "kinematics", "--target", "c-double", "--out", out))
    assert line == ("mbforge generate: error: MBFORGE_LOCAL_WORK: expected a whole number of box-instructions, "
                    f"0 or more; got {value!r}")
    assert not out.exists()


@pytest.mark.slow  # the whole Stewart c-fixed analysis: a minute or more
def test_a_worker_killed_mid_run_loses_nothing(tmp_path):
    """A worker process of the local cluster killed as the out-of-memory killer kills
    (SIGKILL): its pieces run again on the other, the command ends well and no worker is
    left. (The fork pool once ended the command here; a pool of workers once waited
    forever.) That the bounds are the clean run's: tests/test_parallel.py."""
    import signal

    import time

    # the delta's reduced inverse dynamics over 8 x 8 cells in x and y: about 8 s of CPU per
    # worker (the Stewart's kernel took 74 s here)
    (tmp_path / "cells.json").write_text('{"quantities": {"P_x": {"cells": 8}, "P_y": {"cells": 8}}}')
    delta = ("delta", "--kernel", "inverse-dynamics-reduced", "--envelope", str(tmp_path / "cells.json"))
    proc, children, out = _generate_in_pieces(tmp_path, 2, delta, MBFORGE_LOCAL_WORK="0")
    # once the worker runs pieces (5 s of CPU: more than its start-up), not while its nanny starts it
    for _ in range(3000):
        if proc.poll() is not None or _cpu_seconds(children[-1]) > 5.0:
            break
        time.sleep(0.1)
    os.kill(children[-1], signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"no exit 900 s after a worker was killed: {proc.communicate()[1][-2000:]}")
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert (out / "manifest.json").is_file()
    _assert_pieces_ended(children)
