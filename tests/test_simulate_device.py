"""`mbforge simulate --device`: a step kernel run over a horizon on the emulated board (SIM
requests, mbforge.hil.simulate), checked against the host; and the SIM payload's sizes."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbforge.hil import protocol as P
from mbforge.hil.link import LinkError
from mbforge.hil.simulate import decode_sim, sim_payload, ulp_distance
from mbforge.reals import REALS

MBFORGE = Path(sys.executable).parent / "mbforge"
FW = "mbforge-fw test"


@pytest.mark.parametrize("real, n_in, n_state", [("float", 8, 7), ("double", 8, 7), ("float", 330, 328)])
def test_sim_payload_sizes(real, n_in, n_state):
    """The max payload holds a SIM request and a reply of at least one sample (a big state
    grows it), and sim_samples_for counts the samples that fit, no more."""
    size = REALS[real].size
    plain = P.max_payload_for(real, n_in, n_state, FW, P.max_batch_for(real, n_in, n_state))
    mp = P.max_payload_for(real, n_in, n_state, FW, P.max_batch_for(real, n_in, n_state), n_state=n_state)
    assert mp >= plain
    assert mp >= n_in * size + P.SIM_REQUEST_FIXED.size == len(sim_payload(np.zeros(n_in, REALS[real].dtype), 1, 1, 0))
    k = P.sim_samples_for(real, n_state, mp)
    assert k >= 1
    assert P.SIM_REPLY_FIXED.size + k * (4 + n_state * size) <= mp < P.SIM_REPLY_FIXED.size + (k + 1) * (4 + n_state * size)
    if n_state * size > 2048:  # larger than the EVAL batches: sized by the one sample
        assert mp == max(n_in * size + P.SIM_REQUEST_FIXED.size, P.SIM_REPLY_FIXED.size + 4 + n_state * size, plain)
    assert P.SIM_REPLY_FIXED.size == 28 and P.SIM_REQUEST_FIXED.size == 12


def test_sim_reply_decodes_and_refuses_a_wrong_size():
    states = np.arange(6, dtype="<f4").reshape(2, 3)
    body = P.SIM_REPLY_FIXED.pack(2, 5, 1, 0, 2**33 + 7, 99)
    for w, s in zip((10, 11), states):
        body += np.uint32(w).tobytes() + s.tobytes()
    fixed, work, got = decode_sim(body, 2, 3, "<f4")
    assert fixed == (2, 5, 1, 0, 2**33 + 7, 99) and work.tolist() == [10, 11]
    assert np.array_equal(got, states)
    with pytest.raises(LinkError, match="SIM reply of"):
        decode_sim(body[:-1], 2, 3, "<f4")


def test_ulp_distance_counts_across_zero():
    a = np.array([1.0, -0.0, np.float32(1e-45)], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), 0.0, -np.float32(1e-45)], dtype=np.float32)
    assert ulp_distance(a, b).tolist() == [1, 0, 2]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(MBFORGE), *args], capture_output=True, text=True, timeout=timeout)


def _csv(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path) as f:
        head = next(csv.reader(f))
    return head, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


# The device's float32 ali3p trajectory against the host reference (scipy): the pendulum
# (1 m) over 1 s at dt 1e-3 measured 6.1e-6 m (the c-double step alone 7.0e-6: the
# trapezoidal rule's error dominates); the bound leaves room for another float32 rounding,
# not for a wrong kernel (one step of phase is ~3e-3 m at the bottom's speed).
Q_TOL = 5e-5


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    """`mbforge simulate pendulum --device emulated_f405` over 1 s, and the host simulate."""
    root = tmp_path_factory.mktemp("simdev")
    out = root / "dev"
    p = _run("simulate", "pendulum", "--device", "emulated_f405", "--target", "c-float32", "--dt", "1e-3",
             "--t-end", "1", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    host = _run("simulate", "pendulum", "--points", "251", "--t-end", "1", "--out", str(root / "host"))
    assert host.returncode == 0, host.stderr
    return {"out": out, "host": root / "host", "stdout": p.stdout}


@pytest.mark.slow
@pytest.mark.firmware
def test_pendulum_float32_on_the_emulated_board(pendulum):
    out = pendulum["out"]
    head, dev = _csv(out / "pendulum.csv")
    hhead, ref = _csv(pendulum["host"] / "pendulum.csv")
    assert head == hhead  # the host simulate's columns
    assert dev.shape == ref.shape == (251, len(head))  # 1000 steps, a sample every 4
    assert np.allclose(dev[:, 0], ref[:, 0], rtol=0, atol=1e-12)
    q = [i for i, n in enumerate(head) if n.startswith("q.")]
    err = np.abs(dev[:, q] - ref[:, q]).max()
    assert err < Q_TOL, err
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == r["horizon_steps"] == 1000 and r["samples"] == 251
    same = r["divergence"]["host_same_kernel"]
    # bit for bit: the firmware and the host build both compile without contraction, and the
    # step uses only correctly rounded operations (+ - * / sqrt)
    assert same["bit_exact"], same
    assert r["divergence"]["reference"]["q_max_abs"] < Q_TOL
    t = r["timing"]
    assert t["unit"] == "instructions" and t["real_time_factor"] > 1, t
    assert t["overruns"] == 0 and t["wrapped"] == 0 and 0 < t["mean_per_step"] <= t["worst_per_step"]
    html = (out / "report.html").read_text()
    assert html.count('class="figure"') == 2


@pytest.mark.slow
@pytest.mark.firmware
def test_a_horizon_survives_a_damaged_link_and_a_reset(pendulum):
    """SIM requests are pure: through flipped bytes each way, a lost reply and a board reset
    the chained run is the host build's, bit for bit."""
    from helpers.faultproxy import FaultProxy, reset_when_seen

    from mbforge.examples import load_model
    from mbforge.firmware.qemu import Emulator
    from mbforge.verify import hostlib
    from mbforge.hil.link import Link
    from mbforge.hil.simulate import run_horizon
    from mbforge.kernels.step import initial_state

    out = pendulum["out"]
    _, x0 = initial_state(load_model("pendulum").equations(), "ali3p")
    x0 = x0.astype(np.float32)
    elf = out / "firmware" / ".pio" / "build" / "emulated_f405" / "program.elf"
    with Emulator(elf, monitor=True) as emu, \
            FaultProxy(emu.port, flip={"h2d": [150], "d2h": [2500]}, drop_frames={"d2h": [5]}) as proxy:
        with reset_when_seen(emu, proxy, "d2h", 5000), Link(proxy.url, timeout=10) as link:
            run = run_horizon(link, x0, 1000, 4)
            stats = link.stats
    host, failed, status = hostlib.load_kernel(out / "kernel-c-float32").steps(x0, 1000, 4)
    assert run.status == status == 0 and failed is None
    assert np.array_equal(run.samples.view(np.uint32), host.view(np.uint32))
    assert proxy.done["h2d"] == [("flip", 150)] and ("drop_frame", 5) in proxy.done["d2h"]
    assert stats.resets == 1 and stats.retries >= 3 and stats.bad_frames >= 1, stats


@pytest.mark.slow
@pytest.mark.firmware
def test_a_sample_the_link_cannot_wait_for_is_refused_before_the_run(pendulum):
    """A horizon sampled so sparsely that one SIM reply (4e6 steps) would outlast the link's
    reply timeout (1 s here) is refused after one short request measuring the device's pace,
    with one line saying how often to sample instead."""
    from mbforge.examples import load_model
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.link import Link
    from mbforge.hil.simulate import run_horizon
    from mbforge.kernels.step import initial_state

    out = pendulum["out"]
    _, x0 = initial_state(load_model("pendulum").equations(), "ali3p")
    elf = out / "firmware" / ".pio" / "build" / "emulated_f405" / "program.elf"
    with Emulator(elf) as emu, Link(emu.url, timeout=1.0) as link:
        link.hello()
        with pytest.raises(LinkError, match=r"one sample every 4000000 steps would take about .* sample more often"):
            run_horizon(link, x0.astype(np.float32), 8_000_000, 4_000_000)


DEV = ["--device", "emulated_f405", "--dt", "1e-3"]


@pytest.mark.parametrize("extra, words", [
    ([*DEV, "--t-end", "1.0005"], "is not a whole number of steps"),
    ([*DEV, "--t-end", "1", "--every", "0.003"], "does not divide the horizon"),
    ([*DEV, "--t-end", "100000"], "up to 2,000,000 steps"),
    (["--device", "nucleo_f446re", "--dt", "1e-3"], "is not emulated here"),
    (["--dt", "1e-3"], "only with --device"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, extra, words):
    out = tmp_path / "dev"
    p = _run("simulate", "pendulum", *extra, "--out", str(out), timeout=120)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not out.exists()


def test_a_warning_of_the_device_run_is_one_line(tmp_path):
    """Bricard's redundant constraint, found while its initial state is solved: the host
    run's warning line, not Python's warning with a file name and a source line."""
    (tmp_path / "afile").write_text("")
    p = _run("simulate", "bricard", *DEV, "--out", str(tmp_path / "afile" / "dev"), timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 2, p.stderr
    assert lines[0].startswith("mbforge simulate: warning: bricard: 1 redundant equation(s)"), p.stderr
    assert "is a file, not a folder" in lines[1] and "Warning:" not in p.stderr


def _kernel_dir(tmp_path, kernel: str, **options) -> Path:
    from mbforge.examples import load_model
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    out = tmp_path / kernel
    generate(build_kernel(load_model("pendulum").equations(), kernel, **options), "c-float32").write(out)
    return out


@pytest.mark.slow  # the step kernel's generation runs its host reference (~5 s)
def test_sim_is_compiled_in_for_a_step_kernel_only(tmp_path):
    from mbforge.firmware.project import FIRMWARE_VERSION, plan_project
    from mbforge.manifest import load_dir

    step = plan_project(_kernel_dir(tmp_path, "step", dt=1e-3))
    plain = plan_project(_kernel_dir(tmp_path, "forward-dynamics"))
    config = step["src/mbf_config.h"].decode()
    m = load_dir(tmp_path / "step")
    ns = m.step["n_state"]
    assert "#define MBF_T_SIM             0x04u" in config and f"#define MBF_N_STATE           {ns}u" in config
    assert "case MBF_T_SIM:" in step["src/main.c"].decode()
    assert "SIM" not in plain["src/mbf_config.h"].decode() and "SIM" not in plain["src/main.c"].decode()
    mp = P.max_payload_for(m.real, m.n_in, m.n_out, FIRMWARE_VERSION, P.max_batch_for(m.real, m.n_in, m.n_out), ns)
    assert f"#define MBF_MAX_PAYLOAD       {mp}u" in config


@pytest.mark.slow
@pytest.mark.firmware
def test_fixed_point_step_on_the_cortex_m0(tmp_path):
    """A c-fixed step kernel (rk4 on the one-link chain: the fixed-point step kernels the
    range analysis admits today) on the emulated micro:bit (16 MHz Cortex-M0, no FPU) over
    2 s: bit-exact with the host build, within 1e-5 rad of the reference (measured 6.7e-6
    rad over 10 s), faster than real time (3.7x measured), and the report carries the
    kernel's per-step bound, labelled as one step's, next to the measured divergence."""
    out = tmp_path / "dev"
    p = _run("simulate", "chain", "--set", "n=1", "--device", "emulated_microbit", "--target", "c-fixed",
             "--dt", "1e-3", "--t-end", "2", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == 2000 and r["target"] == "c-fixed"
    assert r["divergence"]["host_same_kernel"]["bit_exact"]
    assert 1e-9 < r["divergence"]["reference"]["q_max_abs"] < 1e-5, r["divergence"]
    assert r["timing"]["real_time_factor"] > 1 and r["timing"]["overruns"] == 0
    b = r["per_step_error_bound"]
    assert 0 < b["q"] < 1e-6 and 0 < b["qd"] < 1e-6 and "not a bound on the trajectory" in b["what"]


@pytest.mark.slow
@pytest.mark.firmware
def test_fixed_point_double_pendulum_step_on_the_cortex_m0(tmp_path):
    """The two-link chain's c-fixed Euler step (its pivots floored by analysis.definite,
    its angles analysed over one period) on the emulated micro:bit over 1 s: bit-exact
    with the host build, near the c-double step (measured 1.99e-5 rad over 2 s), faster
    than real time (3.0x measured, 5,400 instructions per step), and the per-step bound
    in the report is the kernel's."""
    out = tmp_path / "dev"
    p = _run("simulate", "chain", "--set", "n=2", "--device", "emulated_microbit", "--target", "c-fixed",
             "--dt", "1e-3", "--integrator", "euler", "--t-end", "1", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == 1000 and r["step"]["integrator"] == "euler"
    assert r["divergence"]["host_same_kernel"]["bit_exact"]
    assert 1e-9 < r["divergence"]["double_step"]["q_max_abs"] < 1e-4, r["divergence"]
    assert r["timing"]["real_time_factor"] > 2 and r["timing"]["overruns"] == 0
    b = r["per_step_error_bound"]
    assert 0 < b["q"] < 1e-5 and 0 < b["qd"] < 1e-2


@pytest.mark.slow
@pytest.mark.firmware
def test_fixed_point_closed_loop_step_on_the_cortex_m0(tmp_path):
    """The pendulum in natural coordinates (a closed model: x^2 + y^2 = 1) as a c-fixed
    step, rk4 with exact multipliers (--penalty 0) analysed over its near-consistent states,
    on the emulated micro:bit over 10 s at dt 10 ms: bit-exact with the host build, within
    1e-6 m of the reference (measured 6.7e-7 m; 2.1e-7 m from the c-double step), faster than
    real time (23.5x measured, 6,816 instructions per step), and the per-step bounds in the
    report are the kernel's (2.4e-9 m, 3.0e-8 m/s)."""
    out = tmp_path / "dev"
    p = _run("simulate", "pendulum", "--device", "emulated_microbit", "--target", "c-fixed", "--dt", "0.01",
             "--integrator", "rk4", "--penalty", "0", "--t-end", "10", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == 1000 and r["step"]["alpha"] == 0.0
    assert r["divergence"]["host_same_kernel"]["bit_exact"]
    assert 1e-9 < r["divergence"]["reference"]["q_max_abs"] < 1e-6, r["divergence"]
    assert r["timing"]["real_time_factor"] > 5 and r["timing"]["overruns"] == 0
    b = r["per_step_error_bound"]
    assert 0 < b["q"] < 1e-8 and 0 < b["qd"] < 1e-6


@pytest.mark.slow
@pytest.mark.firmware
def test_fixed_point_closed_loop_beyond_4_coordinates_on_the_cortex_m0(tmp_path):
    """The N-four-bar with two parallelograms (6 coordinates, 5 constraints) swinging 0.5 rad
    about hanging (--set swing=0.5, its operating envelope), rk4 --penalty 0 in c-fixed over
    the envelope's near-consistent states, on the emulated micro:bit over 10 s at dt 10 ms:
    bit-exact with the host build, within 1e-6 m of the reference (measured 3.1e-7 m; the
    c-double step 2.0e-7 m), 2.0x real time at one instruction per cycle (78,064
    instructions per step), and the report's per-step bounds are the kernel's (2.5e-8 m,
    3.0e-5 m/s)."""
    out = tmp_path / "dev"
    p = _run("simulate", "nfourbar", "--set", "n=2", "--set", "swing=0.5", "--device", "emulated_microbit",
             "--target", "c-fixed", "--dt", "0.01", "--integrator", "rk4", "--penalty", "0", "--t-end", "10",
             "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == 1000 and r["step"]["alpha"] == 0.0 and r["step"]["n_state"] == 12
    assert r["divergence"]["host_same_kernel"]["bit_exact"]
    assert 1e-9 < r["divergence"]["reference"]["q_max_abs"] < 1e-6, r["divergence"]
    assert r["timing"]["real_time_factor"] > 1 and r["timing"]["overruns"] == 0
    b = r["per_step_error_bound"]
    assert 0 < b["q"] < 1e-7 and 0 < b["qd"] < 1e-4
