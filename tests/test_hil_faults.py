"""The HIL link under faults, with real QEMU and real sockets (issue 10's acceptance).

A fault proxy (tests/faultproxy.py) between the harness and QEMU's serial socket flips,
drops and stalls bytes and frames both ways; the board is reset through QEMU's monitor
and QEMU is killed and restarted. Every run must end with every vector answered once,
results equal to a clean run's, and the faults counted in the result's `link` key.
Signals stop `mbforge hil` cleanly: distinct exit code, one line, QEMU gone, the run
database resumable to the same results as an uninterrupted run.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mbforge.firmware.qemu import Emulator
from mbforge.hil import harness
from mbforge.hil.cli import main as hil_cli
from mbforge.hil.link import Link, LinkError, LinkStats, LinkTimeout
from mbforge.hil.harness import load_run

from helpers.faultproxy import FaultProxy, reset_when_seen

pytestmark = [pytest.mark.firmware]

FIXTURES = Path(__file__).parent / "fixtures"
TOY, TOY_DOUBLE = FIXTURES / "toy", FIXTURES / "toy_double"
N = 1500


@pytest.fixture(scope="module")
def fourbar(tmp_path_factory):
    """Four-bar equations: c-float32 firmware for emulated_f405 and the c-double reference."""
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project

    root = tmp_path_factory.mktemp("fourbar_faults")
    for target, out in (("c-float32", "k32"), ("c-double", "k64")):
        subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "fourbar", "--target", target,
                        "--out", str(root / out)], check=True, capture_output=True)
    elf = build(generate_project(root / "k32", root / "proj"), "emulated_f405")
    return {"kernel": root / "k32", "reference": root / "k64", "elf": elf, "root": root}


def _rows(db_path) -> dict:
    with sqlite3.connect(db_path) as c:
        return {i: (o, s) for i, o, s in c.execute("SELECT idx, outputs, status FROM vectors")}


@pytest.fixture(scope="module")
def clean_run(fourbar):
    """The reference run: no faults, 1,500 vectors."""
    db = fourbar["root"] / "clean.hil.sqlite"
    with Emulator(fourbar["elf"]) as emu:
        report = harness.run(emu.url, fourbar["kernel"], fourbar["reference"], vectors=N, run_db=db)
    assert report.passed
    return db


def test_faults_both_ways_and_a_board_reset(fourbar, clean_run, tmp_path):
    """The issue's acceptance: a byte flipped each way, a reply frame dropped, a stall and a
    system_reset in the middle: exit PASS with every vector once, the events counted."""
    db = tmp_path / "faults.hil.sqlite"
    with Emulator(fourbar["elf"], monitor=True) as emu, \
            FaultProxy(emu.port, flip={"h2d": [3000], "d2h": [30000]}, drop_frames={"d2h": [12]},
                       stall={"d2h": {20: 0.6}}) as proxy:
        with reset_when_seen(emu, proxy, "d2h", 90000):
            code = hil_cli(["--port", proxy.url, "--kernel", str(fourbar["kernel"]), "--reference",
                            str(fourbar["reference"]), "--vectors", str(N), "--run", str(db), "--timeout", "3",
                            "--json", str(tmp_path / "faults.json")])
    assert code == 0
    r = json.loads((tmp_path / "faults.json").read_text())
    assert r["passed"] and r["vectors"] >= N
    assert r["vectors_missing"] == 0
    link = r["link"]
    assert proxy.done["h2d"] == [("flip", 3000)]
    assert ("flip", 30000) in proxy.done["d2h"] and ("drop_frame", 12) in proxy.done["d2h"]
    assert link["resets"] == 1, link
    assert link["error_replies"] >= 1 and link["bad_frames"] >= 1 and link["retries"] >= 3, link
    # every vector once, equal to the clean run bit for bit
    assert _rows(db) == _rows(clean_run)
    assert load_run(db)["passed"] and load_run(db)["link"]["resets"] == 1


def test_qemu_killed_and_restarted(fourbar, clean_run, tmp_path):
    """The serial server goes away mid-run and comes back on the same port: the link
    reconnects, sees the boot, resends, and no vector is lost or doubled."""
    db = tmp_path / "restart.hil.sqlite"
    emu = Emulator(fourbar["elf"]).start()
    port = emu.port
    with FaultProxy(port) as proxy:
        half = proxy.when_seen("d2h", 60000)

        def restart():
            if half.wait(60):
                emu.stop()
                time.sleep(0.3)
                restarted.append(Emulator(fourbar["elf"], port=port).start())
        restarted = []
        t = threading.Thread(target=restart, daemon=True)
        t.start()
        try:
            report = harness.run(proxy.url, fourbar["kernel"], fourbar["reference"], vectors=N, run_db=db,
                                 timeout=5.0)
        finally:
            t.join(10)
            for e in [emu, *restarted]:
                e.stop()
    assert restarted and report.passed and report.vectors_missing == 0
    assert report.link["resets"] >= 1 and report.link["reconnects"] >= 1, report.link
    assert _rows(db) == _rows(clean_run)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_hil(args):
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-m", "mbforge.cli", "hil", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_rows(db: Path, n: int, proc, limit: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                with sqlite3.connect(db) as c:
                    if c.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] >= n:
                        return
            except sqlite3.Error:
                pass
        time.sleep(0.1)
    raise AssertionError(f"{db} did not reach {n} rows")


def test_sigterm_half_way_then_resume_gives_the_clean_results(fourbar, clean_run, tmp_path):
    db = tmp_path / "killed.hil.sqlite"
    proc = _start_hil(["--emulate", fourbar["elf"], "--kernel", fourbar["kernel"],
                       "--reference", fourbar["reference"], "--vectors", N, "--run", db])
    _wait_rows(db, 600, proc)
    qemu = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.count("\n") == 1 and "Traceback" not in err and "--resume" in err, err
    assert qemu and not any(_alive(q) for q in qemu)
    kept = len(_rows(db))
    assert 600 <= kept < N + 48
    partial = load_run(db)
    total = partial["vectors"] + partial["robustness_vectors"]  # the robustness set comes last
    assert partial["vectors_missing"] == total - kept and not partial["passed"]

    proc = _start_hil(["--emulate", fourbar["elf"], "--resume", db])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err + out
    assert _rows(db) == _rows(clean_run)
    r = load_run(db)
    assert r["passed"] and r["link"]["sessions"] == 2 and r["vectors_missing"] == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_no_qemu_outlives_mbforge_hil(sig, toy_firmware, tmp_path):
    db = tmp_path / "toy.hil.sqlite"
    proc = _start_hil(["--emulate", toy_firmware("emulated_f405")[1], "--kernel", TOY,
                       "--reference", TOY_DOUBLE, "--vectors", 200000, "--run", db])
    _wait_rows(db, 20, proc)
    qemu = _children(proc.pid)
    assert qemu
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not any(_alive(q) for q in qemu)


def test_link_drops_duplicate_replies_and_counts_them(toy_firmware):
    """A frame sent twice (the host's resend after a lost reply) is answered twice; the
    second answer is dropped and counted, never taken for another request."""
    with Emulator(toy_firmware("emulated_f405")[1]) as emu, \
            FaultProxy(emu.port, stall={"d2h": {4: 2.0}}) as proxy, Link(proxy.url, timeout=5.0) as link:
        link.hello()
        X = np.arange(30, dtype=np.float32).reshape(10, 3)
        res = link.eval_many(X, window=1, batch=1)
        clean = link.eval_many(X, window=1, batch=1)
    assert np.array_equal(res.outputs.view(np.uint32), clean.outputs.view(np.uint32))
    assert link.stats.timeouts >= 1 and link.stats.duplicates >= 1, link.stats


def test_bytes_dropped_both_ways_and_a_request_frame_lost(toy_firmware, tmp_path):
    """Bytes dropped each way and a whole request frame lost on the way to the board: every
    vector answered once, equal to a clean run, the events counted."""
    elf = toy_firmware("emulated_f405")[1]
    clean, faulty = tmp_path / "clean.hil.sqlite", tmp_path / "faulty.hil.sqlite"
    with Emulator(elf) as emu:
        harness.run(emu.url, TOY, TOY_DOUBLE, vectors=400, run_db=clean)
    with Emulator(elf) as emu, FaultProxy(emu.port, drop_bytes={"h2d": [700, 1500], "d2h": [2500, 9000]},
                                          drop_frames={"h2d": [9]}) as proxy:
        report = harness.run(proxy.url, TOY, TOY_DOUBLE, vectors=400, run_db=faulty, timeout=3.0)
    assert report.passed and report.vectors_missing == 0
    assert len(proxy.done["h2d"]) == 3 and len(proxy.done["d2h"]) == 2, proxy.done
    assert report.link["retries"] >= 3 and report.link["bad_frames"] + report.link["error_replies"] >= 3, report.link
    assert _rows(faulty) == _rows(clean)


def test_board_announces_each_boot_with_a_new_boot_id(toy_firmware):
    """At boot the firmware sends its HELLO unasked (seq BOOT_SEQ); the boot id lives in RAM
    that start-up does not clear, so a system_reset gives the next one."""
    from mbforge.hil import protocol as P

    with Emulator(toy_firmware("emulated_f405")[1], monitor=True) as emu, Link(emu.url, timeout=3.0) as link:
        first = link.hello().boot_id
        emu.monitor_command("system_reset")
        frame = link.read_frame(time.monotonic() + 3.0, "the boot HELLO")
        while frame.seq != P.BOOT_SEQ:  # a late reply to the first HELLO's resend
            frame = link.read_frame(time.monotonic() + 3.0, "the boot HELLO")
        assert frame.type == P.HELLO_REPLY
        boot = P.Hello.unpack(frame.payload)
        assert boot.boot_id == first + 1 and boot.digest == link.info.digest
        assert link.hello().boot_id == first + 1


# ---- a noisy link (issue 31 item 4) ------------------------------------------------------------------
def _settled_link(proxy: FaultProxy, timeout: float) -> Link:
    """A link through `proxy` after its HELLO, once late replies (to HELLOs resent while
    the board booted) have passed, so the next frames each way and the counts in
    link.stats are the test's own."""
    link = Link(proxy.url, timeout=timeout)
    link.hello()
    while True:
        try:
            link.read_frame(time.monotonic() + 0.3, "late replies")
        except LinkTimeout:
            link.stats = LinkStats()
            return link


def _eval_request(x: np.ndarray) -> tuple[bytes, int]:
    """An EVAL payload and its frame's length on the wire (the same for every seq: a body
    under 254 bytes costs COBS one byte whatever it holds)."""
    from mbforge.hil import protocol as P

    payload = x.astype(np.float32).tobytes()
    return payload, len(P.encode_frame(P.EVAL, 0, payload))


def test_a_damaged_reply_to_the_last_request_in_flight_is_resent_at_once(toy_firmware):
    """A bad frame resends the request it answered, also the only one in flight (before,
    only the resend timer did): no timeout, one resend."""
    from mbforge.hil import protocol as P

    with Emulator(toy_firmware("emulated_f405")[1]) as emu, FaultProxy(emu.port) as proxy, \
            _settled_link(proxy, 5.0) as link:
        proxy.flip["d2h"].add(proxy.seen["d2h"] + 8)  # inside the next reply's body
        payload, _ = _eval_request(np.ones(3))
        link.request(P.EVAL, payload, what="EVAL")
    assert len(proxy.done["d2h"]) == 1, proxy.done
    s = link.stats
    assert s.bad_frames >= 1 and s.retries == 1 and s.timeouts == 0, s


def test_error_replies_do_not_grow_the_resend_wait(toy_firmware):
    """Three damaged copies of a request (three ERROR replies, each resent at once), then
    the reply to the fourth lost whole: the fifth copy goes after the first wait (~0.3 s),
    not after a wait doubled three times (2 s, the deadline)."""
    from mbforge.hil import protocol as P

    with Emulator(toy_firmware("emulated_f405")[1]) as emu, FaultProxy(emu.port) as proxy, \
            _settled_link(proxy, 2.0) as link:
        payload, length = _eval_request(np.ones(3))
        h, k = proxy.seen["h2d"], proxy.frames["d2h"]
        proxy.flip["h2d"].update(h + i * length + 6 for i in range(3))
        proxy.drop_frames["d2h"].add(k + 4)  # three ERRORs, then the reply to copy 4
        t0 = time.monotonic()
        link.request(P.EVAL, payload, what="EVAL")
        took = time.monotonic() - t0
    s = link.stats
    assert len(proxy.done["h2d"]) == 3 and ("drop_frame", k + 4) in proxy.done["d2h"], proxy.done
    assert s.error_replies == 3 and s.timeouts == 1 and s.retries == 4, s
    assert took < 1.5, took


def test_a_last_copy_goes_out_at_the_deadline(toy_firmware):
    """Three replies lost whole: the waits double (~0.26, 0.52, then 1.04 s, past the
    1.2 s deadline); one last copy at the deadline is answered instead of giving up."""
    from mbforge.hil import protocol as P

    with Emulator(toy_firmware("emulated_f405")[1]) as emu, FaultProxy(emu.port) as proxy, \
            _settled_link(proxy, 1.2) as link:
        payload, _ = _eval_request(np.ones(3))
        k = proxy.frames["d2h"]
        proxy.drop_frames["d2h"].update({k + 1, k + 2, k + 3})
        t0 = time.monotonic()
        link.request(P.EVAL, payload, what="EVAL")
        took = time.monotonic() - t0
    assert [f for f in proxy.done["d2h"] if f[0] == "drop_frame"] == [("drop_frame", k + i) for i in (1, 2, 3)]
    assert link.stats.timeouts == 3 and link.stats.retries == 3, link.stats
    assert 1.1 < took < 2.0, took


NOISY = 300  # vectors of the default noisy runs (the slow layer: N)


@pytest.fixture(scope="module")
def clean_300(fourbar):
    db = fourbar["root"] / "clean300.hil.sqlite"
    with Emulator(fourbar["elf"]) as emu:
        assert harness.run(emu.url, fourbar["kernel"], fourbar["reference"], vectors=NOISY, run_db=db).passed
    return db


def _noisy_run(fourbar, db: Path, rate: float, seed: int, vectors: int):
    """(report, proxy, seconds) of a run behind a proxy flipping bytes at `rate` both ways."""
    t0 = time.monotonic()
    with Emulator(fourbar["elf"]) as emu, \
            FaultProxy(emu.port, flip_rate={"h2d": rate, "d2h": rate}, seed=seed) as proxy:
        report = harness.run(proxy.url, fourbar["kernel"], fourbar["reference"], vectors=vectors, run_db=db)
    return report, proxy, time.monotonic() - t0


def test_a_byte_in_3kb_flipped_both_ways_gives_the_clean_rows(fourbar, clean_300, tmp_path):
    db = tmp_path / "noisy.hil.sqlite"
    report, proxy, _ = _noisy_run(fourbar, db, 1 / 3000, seed=1, vectors=NOISY)
    assert report.passed and report.vectors_missing == 0
    assert len(proxy.done["h2d"]) >= 2 and len(proxy.done["d2h"]) >= 5, proxy.done
    k = report.link
    assert k["bad_frames"] >= 1 and k["error_replies"] >= 1 and k["batch_cuts"] >= 1, k
    assert _rows(db) == _rows(clean_300)


def test_a_flip_per_thousand_bytes_is_slower_but_finishes(fourbar, clean_300, tmp_path):
    """Before, every such run ended within seconds: frames of 20 vectors (2.7 kB both ways)
    were rarely whole and were never made smaller."""
    db = tmp_path / "noisier.hil.sqlite"
    report, proxy, _ = _noisy_run(fourbar, db, 1e-3, seed=1, vectors=NOISY)
    assert report.passed and report.vectors_missing == 0
    assert len(proxy.done["h2d"]) >= 10 and len(proxy.done["d2h"]) >= 30, proxy.done
    assert report.link["batch_cuts"] >= 3, report.link
    assert _rows(db) == _rows(clean_300)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MBFORGE_HIL_NOISE"), reason="set MBFORGE_HIL_NOISE=1: 20 runs, minutes")
def test_twenty_noisy_runs_of_1500_vectors_all_finish_with_the_clean_rows(fourbar, clean_run, tmp_path):
    clean, figures = _rows(clean_run), []
    for seed in range(20):
        db = tmp_path / f"noisy{seed}.hil.sqlite"
        try:
            report, proxy, took = _noisy_run(fourbar, db, 1 / 3000, seed=seed, vectors=N)
            k = report.link
            figures.append(f"seed {seed}: {took:.1f} s, {len(proxy.done['h2d'])}+{len(proxy.done['d2h'])} flips, "
                           f"{k['retries']} resends ({k['timeouts']} after a timeout), {k['batch_cuts']} batch cuts, "
                           f"rows {'identical' if _rows(db) == clean else 'DIFFER'}")
        except LinkError as e:
            figures.append(f"seed {seed}: ABORTED: {e}")
    print("\n" + "\n".join(figures))
    assert all("identical" in f for f in figures), figures
