"""The loop app (`mbforge firmware --app loop --rate HZ`) in QEMU on emulated_f405: the
four-bar kinematics in c-float32 (about 195 instructions, 1050 SysTick ticks a call) from
SysTick at 1 kHz (fits: no overrun) and at 800 kHz (210 cycles of the 168 MHz clock a
period, the handler's entry and the call take more: every call overruns), on one input
vector the host streams. A period is the board's cycles in ticks of the emulator's
virtual time (5.376 a cycle, one instruction taken as one cycle), so the verdict is the
board's. Under -icount the ticks per call are a function of the instructions, so every
window reports the same worst and median, and the same at both rates; the overruns are
counted per call, and every window is reported (consecutive indices). On this board (STM32 USART) the main loop
never sleeps, so the start latency is deterministic too but for the periods a link
byte's interrupt delays (a few hundred ticks at most). Host side: mbforge.hil.loop
and `mbforge hil --loop SECONDS` (exit 0 no overrun, 1 overruns, 2 errors)."""
import numpy as np
import pytest

from mbforge.firmware.cli import main as firmware_cli
from mbforge.firmware.project import ProjectError, loop_period_ticks, plan_project
from mbforge.firmware.qemu import Emulator
from mbforge.hil.cli import main as hil_cli
from mbforge.hil.link import Link, LinkError
from mbforge.hil.loop import read_windows, request
from mbforge.verify.vectors import draw
from mbforge.manifest import Manifest
from mbforge.targets import BOARDS

from helpers import TOY

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]
ENV = "emulated_f405"
FIT, FAIL = 1000, 800_000


@pytest.fixture(scope="module")
def fourbar(tmp_path_factory):
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    root = tmp_path_factory.mktemp("loop")
    k = build_kernel(load("fourbar").equations(), "kinematics")
    generate(k, "c-float32").write(root / "kernel")
    elfs = {}
    for rate in (FIT, FAIL):
        assert firmware_cli(["--kernel", str(root / "kernel"), "--out", str(root / f"fw{rate}"),
                             "--app", "loop", "--rate", str(rate), "--build", "--env", ENV]) == 0
        elfs[rate] = root / f"fw{rate}" / ".pio/build" / ENV / "program.elf"
    m = Manifest.load(root / "kernel")
    # a state inside the kernel's domain (the middle of the declared box is outside its
    # envelope: the kernel would return 2 at once)
    x = draw(m, root / "kernel", 1, motion=False)[0].astype(np.float32)
    return {"kernel": root / "kernel", "elf": elfs, "x": x, "m": m}


def windows(elf, x, n):
    with Emulator(elf) as emu, Link(emu.url, timeout=3.0) as link:
        link.hello()
        ws = read_windows(link, seconds=40.0, inputs=x, windows=n + 1)
    return ws[1:]  # the first may hold periods from before the host's vector


def test_the_loop_app_replaces_the_server_and_builds_in_the_motion():
    with pytest.raises(ProjectError, match="--rate"):
        plan_project(TOY, app="loop")
    plan = plan_project(TOY, app="loop", rate=500)
    main = plan["src/main.c"].decode()
    assert "#define MBF_LOOP_RATE_HZ   500u" in main and "ram_vectors[15] = loop_tick" in main
    assert f"#define MBF_LOOP_PERIOD    {168_000_000 // 500 * 5376 // 1000}u" in main  # 5.376 ticks a cycle
    assert "on_eval" not in main and "zeros until the first one" in main
    assert plan == plan_project(TOY, app="loop", rate=500)


def test_a_rate_that_fits_runs_every_period_without_overrun(fourbar):
    ws = windows(fourbar["elf"][FIT], fourbar["x"], 3)
    assert len(ws) == 3 and [w.index for w in ws] == list(range(ws[0].index, ws[0].index + 3))
    for w in ws:
        assert (w.rate_hz, w.period, w.periods, w.overruns) == (FIT, loop_period_ticks(BOARDS[ENV], FIT), FIT // 10, 0)
        assert w.us(w.period) == pytest.approx(1e6 / FIT)
        # deterministic under -icount, but for the phase of the tick (5.376 ticks an
        # instruction) at which the call starts: within 1 tick
        assert w.worst - w.median <= 1 and abs(w.worst - ws[0].worst) <= 1
        assert 0 < w.latency_min <= w.latency_max < 1000
    assert 500 < ws[0].worst < 5000
    fourbar["cycles"] = ws[0].worst


def test_a_rate_that_does_not_fit_counts_every_call_as_an_overrun(fourbar):
    ws = windows(fourbar["elf"][FAIL], fourbar["x"], 1)
    w = ws[0]
    assert (w.rate_hz, w.period, w.periods) == (FAIL, round(210 * 5.376), FAIL // 10)
    assert w.overruns == w.periods and w.worst - 1 <= w.median <= w.worst
    assert w.total_overruns >= w.overruns
    if "cycles" in fourbar:  # the same call at both rates: the same count
        assert abs(w.worst - fourbar["cycles"]) <= 1


def test_outputs_follow_the_streamed_inputs(fourbar):
    from mbforge.verify.hostlib import load_kernel

    m = fourbar["m"]
    host = load_kernel(fourbar["kernel"])
    with Emulator(fourbar["elf"][FIT]) as emu, Link(emu.url, timeout=3.0) as link:
        link.hello()
        read_windows(link, seconds=20.0, inputs=fourbar["x"], windows=1)
        frame = link.request(0x10, b"", what="LOOP")
    y = np.frombuffer(frame.payload[52:], dtype="<f4")
    Y, status = host(fourbar["x"])  # a host build of the same C: bit for bit
    assert y.shape == (m.n_out,) and status[0] == 0
    np.testing.assert_array_equal(y, Y[0])


def test_hil_loop_cli(fourbar, capsys):
    assert hil_cli(["--emulate", str(fourbar["elf"][FIT]), "--loop", "1", "--kernel", str(fourbar["kernel"])]) == 0
    out = capsys.readouterr().out
    assert "\nwindow " in out and f"periods of 1000 us at {FIT} Hz" in out and "windows" in out
    assert " 0 overruns\n" in out and "168 MHz clock" in out and "5.376 ticks per instruction" in out
    call = float(out.split("call worst ")[1].split(" us")[0])
    assert 0.5 < call < 5  # about 195 instructions at 168 MHz: microseconds, not the ticks
    assert hil_cli(["--emulate", str(fourbar["elf"][FIT]), "--loop", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--loop must be" in err


def test_hil_loop_refuses_the_server_in_one_line(toy_firmware, capsys):
    _, elf = toy_firmware(ENV)
    with Emulator(elf) as emu, Link(emu.url, timeout=3.0) as link:
        link.hello()
        with pytest.raises(LinkError, match="--app loop"):
            request(link)
    assert hil_cli(["--emulate", str(elf), "--loop", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "does not answer LOOP requests" in err


def test_cli_refuses_bad_rates_in_one_line(tmp_path, capsys):
    for args, what in ((["--app", "loop"], "needs --rate"), (["--rate", "10"], "goes with --app loop"),
                       (["--app", "loop", "--rate", "1"], "needs 54 to"),
                       (["--app", "loop", "--rate", "2.5"], "whole number")):
        assert firmware_cli(["--kernel", str(TOY), "--out", str(tmp_path / "p"), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and what in err, err


def test_the_loop_app_on_the_an385_sleeps_between_link_bytes_and_counts_alike(tmp_path):
    """c-fixed on the Cortex-M3: its UART driver drains several bytes per interrupt, so the
    main loop sleeps in WFI there; the cycles per call stay deterministic but for the
    phase of the tick (3.2 ticks an instruction) at which the call starts: within 1 tick."""
    from mbforge.examples import load
    from mbforge.verify.vectors import to_raw
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    k = build_kernel(load("fourbar").equations(), "kinematics")
    generate(k, "c-fixed").write(tmp_path / "kernel")
    assert firmware_cli(["--kernel", str(tmp_path / "kernel"), "--out", str(tmp_path / "fw"), "--app", "loop",
                         "--rate", "100", "--build", "--env", "emulated_an385"]) == 0
    main = (tmp_path / "fw/src/main.c").read_text()
    assert "static const mbf_real_t motion[48][N_IN_ALLOC]" in main  # the motion, in raw fixed point
    m = Manifest.load(tmp_path / "kernel")
    x = to_raw(m, draw(m, tmp_path / "kernel", 1, motion=False), "inputs")[0]
    ws = windows(tmp_path / "fw/.pio/build/emulated_an385/program.elf", x, 2)
    assert [(w.rate_hz, w.period, w.periods) for w in ws] == [(100, 800_000, 10)] * 2  # 250,000 cycles, 3.2 ticks each
    counts = [c for w in ws for c in (w.worst, w.median)]
    assert max(counts) - min(counts) <= 1 and 1000 < ws[0].worst < 50_000


def test_the_loop_app_runs_on_the_cortex_m0(tmp_path):
    """The micro:bit's Cortex-M0 has no VTOR: the flash vector table's SysTick entry is the
    loop app's handler. c-fixed four-bar kinematics at 100 Hz: every window, no overrun,
    the call's ticks the instructions the HIL server measures (4.096 ticks each)."""
    from mbforge.examples import load
    from mbforge.verify.vectors import to_raw
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    env = "emulated_microbit"
    k = build_kernel(load("fourbar").equations(), "kinematics")
    generate(k, "c-fixed").write(tmp_path / "kernel")
    assert firmware_cli(["--kernel", str(tmp_path / "kernel"), "--out", str(tmp_path / "fw"), "--app", "loop",
                         "--rate", "100", "--build", "--env", env]) == 0
    elf = tmp_path / f"fw/.pio/build/{env}/program.elf"
    m = Manifest.load(tmp_path / "kernel")
    x = to_raw(m, draw(m, tmp_path / "kernel", 1, motion=False), "inputs")[0]
    with Emulator(elf) as emu, Link(emu.url, timeout=3.0) as link:
        link.hello()
        ws = read_windows(link, seconds=60.0, inputs=x, windows=3)[1:]
    assert [w.index for w in ws] == [ws[0].index, ws[0].index + 1]
    for w in ws:
        assert (w.rate_hz, w.period, w.periods, w.overruns) == (100, round(160_000 * 4.096), 10, 0)
    instructions = ws[0].median / 4.096
    assert 3000 < instructions < 8000  # the HIL server measures about 5,600 for this kernel
