"""Each defect row of the bad-input sweep (issue 31, ../shared/notes/bad-input.md: items 6, 9,
11, 12, 13, 14) as one case: the real `mbforge` command line in a fresh process, in a
scratch folder. Every case must end with a non-zero exit and exactly one line on stderr
naming the problem, no traceback, nothing written anywhere (the scratch folder and the
shared kernels and firmware are compared file by file before and after), and no process
of its group left running. The kernels and the firmware the hil and firmware cases name
are built once for the module (`built`)."""
from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

MBFORGE = str(Path(sys.executable).with_name("mbforge"))
TIMEOUT = 90  # seconds per case; each is refused before any real work (a few seconds)

MODEL_FILES = {
    "exit0.py": "import sys\ndef build():\n    sys.exit(0)\n",
    "exit3.py": "import sys\ndef build():\n    sys.exit(3)\n",
    "exitimport.py": "raise SystemExit(0)\ndef build():\n    pass\n",
    "infrange.py": "import math\nfrom mbforge.model import Model\n\ndef build():\n    m = Model('nanr')\n"
                   "    x = m.coordinate('x', range=(-math.inf, math.inf))\n    m.constraint(x - 0.25, 'fix')\n"
                   "    m.output('xx', x)\n    return m\n",
}
HIL = ["hil", "--kernel", "{k32}", "--reference", "{k64}", "--emulate", "{elf}"]
FW = ["firmware", "--kernel", "{k32}", "--out", "p"]
LONG = "a" * 5000

# (id, argv with {placeholders}, what the one line must say (a regex))
CASES = [
    # generate (items 6, 12, 14)
    ("generate-build-exit0", ["generate", "{models}/exit0.py", "--out", "o"], r"build\(\) called sys\.exit\(0\)"),
    ("generate-build-exit3", ["generate", "{models}/exit3.py", "--out", "o"], r"build\(\) called sys\.exit\(3\)"),
    ("generate-exit-at-import", ["generate", "{models}/exitimport.py", "--out", "o"], r"called sys\.exit\(0\) while"),
    ("generate-example-build-error", ["generate", "spatial_chain", "--set", "n=abc", "--out", "o"],
     r"example 'spatial_chain': build\(\) failed: ValueError"),
    ("generate-c-fixed-unbounded-range", ["generate", "{models}/infrange.py", "--target", "c-fixed", "--out", "o"],
     r"input x: its range is unbounded; target c-fixed"),
    ("generate-out-empty", ["generate", "fourbar", "--out", ""], r"--out must name a folder"),
    ("generate-prefix-5000", ["generate", "fourbar", "--prefix", LONG, "--out", "o"],
     r"--prefix a+\.\.\. has 5000 characters; at most 63"),
    ("generate-multipliers-1e6", ["generate", "fourbar", "--target", "verilog", "--variant", "shared",
                                  "--multipliers", "1000000", "--out", "o"], r"--multipliers 1000000: must be at most"),
    ("generate-multipliers-1000", ["generate", "fourbar", "--target", "verilog", "--variant", "shared",
                                   "--multipliers", "1000", "--out", "o"], r"--multipliers 1000: must be at most"),
    # simulate (items 6, 12, 13, 14)
    ("simulate-t-end-negative", ["simulate", "fourbar", "--t-end", "-1", "--out", "s"], r"--t-end -1: .*ends? before"),
    ("simulate-t-end-zero", ["simulate", "fourbar", "--t-end", "0", "--out", "s"], r"--t-end 0: .*ends? before"),
    ("simulate-t-end-1e6", ["simulate", "fourbar", "--set", "driven=False", "--t-end", "1e6", "--out", "s"],
     r"--t-end must be .* up to"),
    ("simulate-t-end-inf", ["simulate", "fourbar", "--t-end", "inf", "--out", "s"], r"--t-end must be"),
    ("simulate-points-1e9", ["simulate", "fourbar", "--points", "1000000000", "--out", "s"], r"--points must be"),
    ("simulate-out-a-file", ["simulate", "fourbar", "--out", "f"], r"--out f: f is a file"),
    ("simulate-out-read-only", ["simulate", "fourbar", "--out", "/sys/kernel/mbf_s"], r"--out /sys/kernel/mbf_s: "
                                                                                      r"cannot write"),
    ("simulate-motion-disagrees", ["simulate", "stewart", "--motion", "yaw", "--set", "motion=roll", "--out", "s"],
     r"--motion yaw and --set motion=roll disagree"),
    ("simulate-build-exit0", ["simulate", "{models}/exit0.py", "--out", "s"], r"sys\.exit\(0\)"),
    # hdl (items 6, 9, 14)
    ("hdl-vectors-negative", ["hdl", "fourbar", "--vectors", "-5", "--out", "h"], r"--vectors must be"),
    ("hdl-vectors-1e12", ["hdl", "fourbar", "--vectors", "1000000000000", "--no-synth", "--out", "h"],
     r"--vectors must be"),
    ("hdl-seed-negative", ["hdl", "fourbar", "--seed", "-1", "--no-synth", "--vectors", "5", "--out", "h"],
     r"--seed must be"),
    ("hdl-build-exit0", ["hdl", "{models}/exit0.py", "--out", "h"], r"sys\.exit\(0\)"),
    ("hdl-rtl-a-symlink", ["hdl", "fourbar", "--no-synth", "--vectors", "5", "--out", "hsym"],
     r"hsym/rtl is a symbolic link"),
    # demo (items 6, 14)
    ("demo-kernel-unknown", ["demo", "--kernel", "nope"], r"argument --kernel: invalid choice: 'nope'"),
    ("demo-vectors-1e12", ["demo", "--vectors", "1000000000000"], r"--vectors must be"),
    ("demo-vectors-negative", ["demo", "--vectors", "-1"], r"--vectors must be"),
    ("demo-seed-negative", ["demo", "--vectors", "10", "--seed", "-1"], r"--seed must be"),
    ("demo-json-a-folder", ["demo", "--vectors", "10", "--json", "d"], r"--json d is a folder"),
    ("demo-out-read-only", ["demo", "--vectors", "10", "--out", "/sys/kernel/mbf_d"], r"cannot write"),
    ("demo-build-exit0", ["demo", "--model", "{models}/exit0.py"], r"sys\.exit\(0\)"),
    # firmware (items 13, 14)
    ("firmware-baud-negative", [*FW, "--baud", "-9600"], r"--baud must be"),
    ("firmware-baud-zero", [*FW, "--baud", "0"], r"--baud must be"),
    ("firmware-baud-past-32-bits", [*FW, "--baud", str(2**40)], r"--baud must be"),
    ("firmware-rate-inf", [*FW, "--app", "loop", "--rate", "inf"], r"--rate must be"),
    ("firmware-verilog-kernel", ["firmware", "--kernel", "{kv}", "--out", "p"], r"target verilog .* not C"),
    # hil: numbers (items 6, 12, 14)
    ("hil-seed-negative", [*HIL, "--seed", "-1"], r"--seed must be"),
    ("hil-vectors-1e12", [*HIL, "--vectors", "1000000000000"], r"--vectors must be"),
    ("hil-timeout-nan", [*HIL, "--vectors", "10", "--timeout", "nan"], r"--timeout must be"),
    ("hil-timeout-1e-9", [*HIL, "--vectors", "10", "--timeout", "1e-9"], r"--timeout must be"),
    ("hil-timeout-inf", [*HIL, "--vectors", "10", "--timeout", "inf"], r"--timeout must be"),
    ("hil-timeout-zero", [*HIL, "--vectors", "10", "--timeout", "0"], r"--timeout must be"),
    ("hil-timeout-negative", [*HIL, "--vectors", "10", "--timeout", "-5"], r"--timeout must be"),
    ("hil-window-zero", [*HIL, "--vectors", "10", "--window", "0"], r"--window must be"),
    ("hil-window-negative", [*HIL, "--vectors", "10", "--window", "-3"], r"--window must be"),
    ("hil-window-100000", [*HIL, "--vectors", "10", "--window", "100000"], r"--window must be"),
    ("hil-batch-zero", [*HIL, "--vectors", "10", "--batch", "0"], r"--batch must be"),
    ("hil-batch-negative", [*HIL, "--vectors", "10", "--batch", "-1"], r"--batch must be"),
    ("hil-baud-negative", [*HIL, "--vectors", "10", "--baud", "-9600"], r"--baud must be"),
    ("hil-loop-inf", ["hil", "--emulate", "{elf}", "--loop", "inf"], r"--loop must be"),
    # hil: reports checked before the run (item 14) and never onto an input (item 11)
    ("hil-json-a-folder", [*HIL, "--vectors", "10", "--json", "d"], r"--json d is a folder"),
    ("hil-html-a-folder", [*HIL, "--vectors", "10", "--html", "d"], r"--html d is a folder"),
    ("hil-junit-a-folder", [*HIL, "--vectors", "10", "--junit", "d"], r"--junit d is a folder"),
    ("hil-html-missing-folder", [*HIL, "--vectors", "10", "--html", "no/r.html"], r"--html no/r\.html: folder no "
                                                                                 r"does not exist"),
    ("hil-junit-missing-folder", [*HIL, "--vectors", "10", "--junit", "no/r.xml"], r"folder no does not exist"),
    ("hil-json-onto-run", [*HIL, "--vectors", "10", "--json", "r.sqlite", "--run", "r.sqlite"],
     r"--json r\.sqlite names a file of --run"),
    ("hil-json-onto-manifest", [*HIL, "--vectors", "5", "--json", "{k32}/manifest.json"], r"names a file of --kernel"),
    ("hil-json-onto-elf", [*HIL, "--vectors", "5", "--json", "{elf}"], r"names a file of --emulate"),
    ("hil-html-onto-json", [*HIL, "--vectors", "10", "--json", "r.out", "--html", "r.out"],
     r"--html r\.out names a file of --json"),
    ("hil-junit-onto-reference", [*HIL, "--vectors", "5", "--junit", "{k64}/manifest.json"],
     r"names a file of --reference"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The kernels (c-float32, c-double, verilog), the server firmware built from the
    float kernel, and the model files the cases name: made once, real."""
    root = tmp_path_factory.mktemp("built")
    for name, target in (("k32", "c-float32"), ("k64", "c-double"), ("kv", "verilog")):
        _ok([MBFORGE, "generate", "fourbar", "--target", target, "--out", str(root / name)])
    _ok([MBFORGE, "firmware", "--kernel", str(root / "k32"), "--out", str(root / "fw"), "--build"])
    elf = root / "fw" / ".pio" / "build" / "emulated_f405" / "program.elf"
    assert elf.is_file()
    models = root / "models"
    models.mkdir()
    for name, text in MODEL_FILES.items():
        (models / name).write_text(text)
    return {"k32": root / "k32", "k64": root / "k64", "kv": root / "kv", "elf": elf, "models": models}


def _ok(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-2000:])


def _scratch(cwd: Path) -> None:
    """What the cases find in their folder: a file, an empty folder, and hsym/rtl, a
    symlink to a folder outside (elsewhere/) that holds a file."""
    (cwd / "f").write_text("x")
    (cwd / "d").mkdir()
    (cwd / "elsewhere").mkdir()
    (cwd / "elsewhere" / "keep.txt").write_text("precious")
    (cwd / "hsym").mkdir()
    (cwd / "hsym" / "rtl").symlink_to("../elsewhere")


def _snapshot(*roots: Path) -> dict:
    """Every path below roots: a symlink's target, a file's sha256, a folder's mark."""
    seen = {}
    for root in roots:
        paths = [root] if root.is_file() else [root, *root.rglob("*")]
        for p in paths:
            if p.is_symlink():
                seen[p] = ("link", os.readlink(p))
            elif p.is_file():
                seen[p] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                seen[p] = ("dir",)
    return seen


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(built, tmp_path, argv, words):
    cwd = tmp_path / "run"
    cwd.mkdir()
    _scratch(cwd)
    shared = [built[k] for k in ("k32", "k64", "kv", "elf")]
    before = _snapshot(cwd, *shared)
    argv = [a.format(**built) for a in argv]
    # its own process group: every process it starts (QEMU, pio, compilers) is findable after
    proc = subprocess.Popen([MBFORGE, *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"no answer within {TIMEOUT} s: mbforge {' '.join(argv)[:200]}")
    gone = _group_gone(proc.pid)
    if not gone:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode > 0, (proc.returncode, out[-500:], err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    lines = err.splitlines()
    assert len(lines) == 1, err[-3000:]
    command = argv[0]
    assert lines[0].startswith(f"mbforge {command}: error: "), lines[0]
    assert re.search(words, lines[0]), lines[0]
    assert gone, "a process of the command's group is still running"
    assert _snapshot(cwd, *shared) == before, "the command wrote, changed or removed a file"
    assert not Path("/sys/kernel/mbf_s").exists() and not Path("/sys/kernel/mbf_d").exists()


def test_simulate_writes_nothing_through_a_symlink(tmp_path):
    """A planted s/fourbar.csv -> ../victim.txt is replaced by the CSV, the victim untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "fourbar.csv").symlink_to("../victim.txt")
    r = subprocess.run([MBFORGE, "simulate", "fourbar", "--points", "11", "--out", "s"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    csv = tmp_path / "s" / "fourbar.csv"
    assert not csv.is_symlink() and csv.read_text().startswith("t,") and len(csv.read_text().splitlines()) == 12


def test_junit_xml_parses_when_the_firmware_string_holds_control_characters():
    """The device's HELLO string is the firmware's to choose: any byte it sends is kept
    (as \\xNN) and the XML still parses."""
    import xml.etree.ElementTree as ET

    from mbforge.hil.report import junit_xml

    firmware = "mbforge-fw\x01\x1b[31m<x>&\x7f\ufffe"
    root = ET.fromstring(junit_xml({"kernel": "k\x00", "device": {"firmware": firmware}, "vectors": 3}).encode())
    prop = root.find(".//property[@name='device.firmware']")
    assert prop.get("value") == "mbforge-fw\\x01\\x1b[31m<x>&\x7f\\xfffe"
    assert root.find("testsuite").get("name") == "hil.k\\x00"


def test_a_second_ctrl_c_during_the_first_ones_clean_up_is_still_one_line(tmp_path):
    """Two SIGINTs 3 ms apart (an impatient user): exit 130, one line, no traceback."""
    import time

    for _ in range(2):
        proc = subprocess.Popen([MBFORGE, "simulate", "fourbar", "--points", "1000000", "--out", "s"], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(4)  # imported and computing (a million points take longer)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.003)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        assert proc.returncode == 130 and err == "mbforge simulate: interrupted\n", (proc.returncode, err[-2000:])
        assert not (tmp_path / "s").exists()
