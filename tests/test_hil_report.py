"""The HIL report (mbforge.hil.report): HTML that renders in headless Chromium, JUnit XML
of the usual structure, both from a result dict alone; and the comparison rules the
report states (NaN by class, double kernels within a tolerance of the host model)."""
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from mbforge.verify import hostlib
from mbforge.verify.compare import DOUBLE_HOST_TOL, bit_exact, compare
from mbforge.hil.harness import Report
from mbforge.hil.report import junit_xml, render_html, vector_details
from mbforge.verify.vectors import draw, from_raw, to_raw
from mbforge.manifest import Manifest

FIXTURES = Path(__file__).parent / "fixtures"
TOY, TOY_DOUBLE, TOY_WRONG = FIXTURES / "toy", FIXTURES / "toy_double", FIXTURES / "toy_double_wrong"
CHROMIUM = shutil.which("chromium")


def with_motion(src: Path, dst: Path, n: int = 40) -> Path:
    """A copy of a kernel folder with a motion file (the manifest's digest unchanged)."""
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["motion"] = "motion.json"
    (dst / "manifest.json").write_text(json.dumps(m))
    t = np.linspace(0, 2 * np.pi, n)
    (dst / "motion.json").write_text(json.dumps({"vectors": np.c_[np.sin(t), 0.5 * np.cos(t), 1.5 + t / 5].tolist()}))
    return dst


def host_result(kernel: Path, reference: Path, n: int = 200, link: dict | None = None) -> dict:
    """A result dict as the harness makes it, with the kernel compiled on the host as the
    device (real arithmetic, no link): what a run database would hand back."""
    m, ref_m = Manifest.load(kernel), Manifest.load(reference)
    X = draw(m, kernel, n, seed=3)
    X_dev = to_raw(m, X)
    X_used = from_raw(m, X_dev, "inputs")
    dev = hostlib.load_kernel(kernel).eval(X_dev)
    ref = hostlib.load_kernel(reference).eval(X_used)
    work = np.full(len(X), 17, dtype=np.int64)
    c = compare(m, dev, ref=ref, host=dev)
    details = vector_details(m, X_used, n, from_raw(m, dev.outputs), dev.status, ref.outputs, ref.status, work, c.groups)
    passed = all(g.passed for g in c.groups) and c.status_mismatches == 0
    stats = {"min": 17, "median": 17.0, "max": 17}
    r = Report(m.function, {"url": "host", "firmware": "mbforge-fw 0.1.0", "digest": m.digest, "real": m.real,
                            "counter": "SysTick", "counter_hz": 0, "board": "emulated_f405"},
               len(X), c.groups, stats | {"unit": "instructions", "ticks_per_unit": 5.376, "counter_overflows": 0},
               stats, c.status_mismatches, c.host.to_json(), passed, {"total": 1.0, "eval": 0.5}, details).to_json()
    if link is not None:
        r["link"] = link
    return json.loads(json.dumps(r))  # through JSON, as stored


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("k")
    good = host_result(with_motion(TOY, d / "toy"), TOY_DOUBLE,
                       link={"retries": 3, "crc_errors": 1, "resets": 1, "duplicates": 2})
    bad = host_result(with_motion(TOY, d / "toy2"), TOY_WRONG)
    return good, bad


# ---- JUnit ---------------------------------------------------------------------------------

def check_junit(text: str) -> ET.Element:
    """The usual JUnit structure (testsuites > testsuite > testcase [> failure]) with
    counts that agree with the cases."""
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    s = suites[0]
    cases = s.findall("testcase")
    assert int(s.get("tests")) == len(cases) == int(root.get("tests"))
    fails = [c for c in cases if c.find("failure") is not None]
    assert int(s.get("failures")) == len(fails) == int(root.get("failures"))
    assert s.get("errors") == "0" and float(s.get("time")) >= 0
    for c in cases:
        assert c.get("name") and c.get("classname", "").startswith("hil.")
        f = c.find("failure")
        if f is not None:
            assert f.get("message") and f.get("type")
    return s


@pytest.mark.host
def test_junit_one_case_per_output_group_and_status(results):
    good, bad = results
    s = check_junit(junit_xml(good))
    names = [c.get("name") for c in s.findall("testcase")]
    assert names == ["output y", "status codes", "host model bit-exact"]
    assert all(c.find("failure") is None for c in s.findall("testcase"))
    s = check_junit(junit_xml(bad))
    [f] = [c for c in s.findall("testcase") if c.find("failure") is not None]
    assert f.get("name") == "output y" and "max rel error" in f.find("failure").get("message")


# ---- HTML ---------------------------------------------------------------------------------

@pytest.mark.host
def test_html_has_the_sections_and_no_external_assets(results):
    good, bad = results
    page = render_html(good)
    for text in ("Error histograms", "Error along the motion", "Worst vectors", "Random vs motion",
                 "Work per call", "Link statistics", "crc_errors", "board emulated_f405 at 168 MHz", "x[0]="):
        assert text in page, text
    assert len(re.findall(r'<img class="figure"', page)) == 3
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from outside
    # 17 instructions at 168 MHz
    assert "0.101" in page
    assert "FAIL" in render_html(bad) and "PASS" in page
    # an older result without per-vector data still renders, without figures
    old = {k: v for k, v in good.items() if k not in ("per_vector", "link")}
    assert "no per-vector data" in render_html(old) and "<img" not in render_html(old)


def chromium(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.host
@pytest.mark.slow
@pytest.mark.needs("chromium")
def test_html_figures_render_in_headless_chromium(results, tmp_path):
    good, _ = results
    page = tmp_path / "report.html"
    # the probe writes each figure's decoded size into the DOM once the page has loaded
    probe = ("<script>window.addEventListener('load', () => { const p = document.createElement('pre');"
             "p.id = 'probe'; p.textContent = [...document.images].map(i => i.complete + ':' + i.naturalWidth"
             " + 'x' + i.naturalHeight).join(' '); document.body.appendChild(p); });</script>")
    page.write_text(render_html(good).replace("</body>", probe + "</body>"))
    r = chromium(["--virtual-time-budget=10000", "--dump-dom", page.as_uri()], tmp_path)
    m = re.search(r'<pre id="probe">([^<]*)</pre>', r.stdout)
    assert m, (r.stdout[-2000:], r.stderr[-2000:])
    sizes = m.group(1).split()
    assert len(sizes) == 3
    for s in sizes:
        done, wh = s.split(":")
        w, h = map(int, wh.split("x"))
        assert done == "true" and w > 300 and h > 150, sizes

    shot = tmp_path / "report.png"
    page.write_text(render_html(good))
    r = chromium(["--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()], tmp_path)
    assert shot.is_file(), r.stderr[-2000:]
    import matplotlib.image
    img = matplotlib.image.imread(str(shot))[..., :3]
    assert img.shape[0] >= 2000
    # not blank: many distinct colours (the plots' blue and orange bars among them)
    colours = np.unique((img.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50
    blue = np.all(np.abs(img - np.array([0x4C, 0x78, 0xA8]) / 255) < 0.02, axis=-1)
    assert blue.sum() > 500
    keep = Path(__file__).parent.parent / ".pytest_cache" / "hil_report.png"  # for a look by eye
    keep.parent.mkdir(exist_ok=True)
    shutil.copy(shot, keep)


# ---- the comparison rules the report states ----------------------------------------------------

def test_nan_compares_by_class_not_sign_or_payload():
    f = np.float32
    qnan, negnan = np.array([np.nan], dtype=f), -np.array([np.nan], dtype=f)
    payload = np.array([0x7FC00123], dtype=np.uint32).view(f)
    assert np.signbit(negnan[0]) and not np.signbit(qnan[0])
    for other in (negnan, payload):
        r = bit_exact(qnan.reshape(1, 1), [0], other.reshape(1, 1), [0], ["y[0]"])
        assert r.equal
    # NaN against a number, and the signs of zero, still differ
    assert not bit_exact(qnan.reshape(1, 1), [0], np.zeros((1, 1), dtype=f), [0], ["y[0]"]).equal
    assert not bit_exact(np.zeros((1, 1)), [0], -np.zeros((1, 1)), [0], ["y[0]"]).equal


@pytest.mark.host
def test_double_host_model_is_within_a_tolerance_with_a_note():
    m = Manifest.load(TOY_DOUBLE)
    X = draw(m, TOY_DOUBLE, 50, seed=1)
    host = hostlib.load_kernel(TOY_DOUBLE).eval(X)
    # a libm one ulp off on some outputs: not bit-exact, but within the rule
    Yd = host.outputs.copy()
    Yd[::7, 0] = np.nextafter(Yd[::7, 0], np.inf)
    c = compare(m, (Yd, host.status, None), ref=host, host=host)
    assert not c.host.equal and c.host.passed
    j = c.host.to_json()
    assert j["within_tolerance"] and "newlib" in j["note"] and j["tolerance"] == DOUBLE_HOST_TOL
    # far off fails; so does a NaN against a number
    Yd[3, 1] *= 1 + 1e-9
    assert not compare(m, (Yd, host.status, None), ref=host, host=host).host.passed
    Yd = host.outputs.copy()
    Yd[0, 0] = np.nan
    assert not compare(m, (Yd, host.status, None), ref=host, host=host).host.passed
    # float kernels stay bit-exact, without a note
    mf = Manifest.load(TOY)
    hf = hostlib.load_kernel(TOY).eval(to_raw(mf, draw(mf, TOY, 5)))
    assert compare(mf, hf, host=hf).host.to_json() == {"vectors_mismatched": 0, "elements_mismatched": 0}


# ---- end to end: `mbforge hil --html --junit` on the emulated board --------------------------

@pytest.mark.firmware
@pytest.mark.usefixtures("deadline")
def test_hil_cli_writes_html_junit_and_json(toy_firmware, tmp_path, capsys):
    from mbforge.hil.cli import main as hil_cli
    kernel = with_motion(TOY, tmp_path / "toy")
    out = {k: tmp_path / f"r.{k}" for k in ("json", "html", "xml")}
    code = hil_cli(["--emulate", str(toy_firmware("emulated_f405")[1]), "--kernel", str(kernel),
                    "--reference", str(TOY_DOUBLE), "--vectors", "150", "--host-model",
                    "--json", str(out["json"]), "--html", str(out["html"]), "--junit", str(out["xml"])])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "at 168 MHz (emulated_f405): min 0.101, median 0.101, max 0.101 us" in text  # 17 instructions
    r = json.loads(out["json"].read_text())
    assert r["device"]["board"] == "emulated_f405"
    pv = r["per_vector"]
    assert (pv["n_random"], pv["n_motion"]) == (150, 40) and len(pv["groups"]["y"]["rel_error"]) == 190
    assert pv["work"] == [17] * 190 and pv["worst"][0]["inputs"].keys() == {"x[0]", "x[1]", "x[2]"}
    page = out["html"].read_text()
    assert page == render_html(r)  # the report is the result dict's, nothing else
    assert "0.101" in page and page.count('<img class="figure"') == 3
    check_junit(out["xml"].read_text())
    # a report file that cannot be written: one line, exit 2
    code = hil_cli(["--emulate", str(toy_firmware("emulated_f405")[1]), "--kernel", str(kernel),
                    "--reference", str(TOY_DOUBLE), "--vectors", "5", "--html", str(tmp_path / "no" / "r.html"),
                    "--run", str(tmp_path / "bad-html.hil.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot write" in err and "Traceback" not in err


@pytest.mark.firmware
@pytest.mark.slow
@pytest.mark.usefixtures("deadline")
def test_double_firmware_with_host_model_passes_with_the_note(tmp_path, capsys):
    """fourbar kinematics in c-double (sin/cos from newlib on the board, glibc on the host):
    `--host-model` passes within the double rule and says why bits may differ."""
    from mbforge.cli import main as cli
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.hil.cli import main as hil_cli
    k = tmp_path / "double"
    assert cli(["generate", "fourbar", "--kernel", "kinematics", "--target", "c-double", "--out", str(k)]) == 0
    elf = build(generate_project(k, tmp_path / "proj"), "emulated_f405")
    out = tmp_path / "r.json"
    code = hil_cli(["--emulate", str(elf), "--kernel", str(k), "--reference", str(k), "--vectors", "300",
                    "--host-model", "--json", str(out), "--junit", str(tmp_path / "r.xml")])
    text = capsys.readouterr().out
    assert code == 0, text
    h = json.loads(out.read_text())["host_model"]
    assert h["within_tolerance"] and h["max_rel_difference"] <= DOUBLE_HOST_TOL
    assert "note:" in text and "newlib" in text
    [case] = [c for c in check_junit((tmp_path / "r.xml").read_text()) if c.get("name") == "host model within tolerance"]
    assert case.find("failure") is None


PROGRESS = """
import sys, time
from mbforge.hil.report import progress_bar
with progress_bar(10) as update:
    update(1, 10)            # a short run prints nothing
print("short done", flush=True)
with progress_bar(10) as update:
    time.sleep(float(sys.argv[1]))
    update(5, 10)            # a run past 2 s draws the bar
    time.sleep(0.2)
"""


def run_progress(stderr, seconds: float) -> subprocess.CompletedProcess:
    import sys
    return subprocess.run([sys.executable, "-c", PROGRESS, str(seconds)], stderr=stderr,
                          stdout=subprocess.PIPE, text=True, timeout=60)


def test_progress_bar_only_on_a_terminal_and_only_on_long_runs():
    import os
    import select
    r = run_progress(subprocess.PIPE, 2.2)  # stderr not a terminal: silent
    assert r.returncode == 0 and r.stderr == "" and "short done" in r.stdout
    import fcntl
    import struct
    import termios
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a fresh pty is 0x0
    try:
        r = run_progress(slave, 0.0)  # a terminal, but a short run: silent
        assert r.returncode == 0 and not select.select([master], [], [], 0.2)[0]
        r = run_progress(slave, 2.2)
        assert r.returncode == 0
        seen = b""
        while select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 4096)
        assert b"5/10" in seen, seen
    finally:
        os.close(master)
        os.close(slave)
