"""The verification package shared by the HIL harness and the RTL benches (mbforge.verify:
device, vectors, compare, hostlib): the same vectors through two real devices (the host library
and the Icarus RTL; the host library and the emulated board over the socket link) agree
raw word for raw word on a c-fixed kernel; the comparison sees a single differing bit;
the vector source keeps to the domain; statuses are judged by class, once for both;
verify, hdl's sim/bench/synth and hil stay off the model layer, verify and hdl off hil."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbforge.verify import hostlib, vectors
from mbforge.verify.compare import STATUS_CLASSES, bit_exact, bound_ratio, compare, status_checks
from mbforge.verify.device import Device, Evaluation
from mbforge.manifest import Manifest, ManifestError, load_dir
from mbforge.pipeline import generate

from helpers.hdl_kernels import functions_kernel, tiny_kernel

ROOT = Path(__file__).resolve().parent.parent
INT32_EDGES = [0, 1, -1, 2**31 - 1, -2**31, 2**30, -2**30, 65536, -65536]


def _edge_rows(n_in: int) -> np.ndarray:
    """Raw words far outside the declared ranges: every pair of edge words on the first
    two inputs (saturation, zero divisors), the rest 0."""
    rows = [[a, b] + [0] * (n_in - 2) for a in INT32_EDGES for b in INT32_EDGES]
    return np.array(rows, dtype=np.int32)


@pytest.mark.hdl
def test_host_library_and_icarus_rtl_agree_bit_for_bit(tmp_path, deadline):
    from mbforge.hdl import sim as S

    k = functions_kernel()
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "c-double").write(tmp_path / "double")
    generate(k, "verilog", options={"variant": "pipelined"}).write(tmp_path / "rtl")
    m = Manifest.load(tmp_path / "fixed")
    X = np.vstack([vectors.draw_raw(m, tmp_path / "fixed", 60, seed=7), _edge_rows(m.n_in)])

    host = hostlib.load_kernel(tmp_path / "fixed")
    rtl = S.RtlDevice(S.build(tmp_path / "rtl", "icarus"), seed=7)
    assert isinstance(host, Device) and isinstance(rtl, Device)
    h, r = host.eval(X), rtl.eval(X)
    assert h.work is None and rtl.work_unit == "cycles"
    assert r.outputs.dtype == h.outputs.dtype == np.int32
    assert np.array_equal(r.status, h.status)
    run = h.status != 2  # status 2: nothing computed in C; the RTL's outputs mean nothing then
    assert np.array_equal(r.outputs[run], h.outputs[run])
    assert (h.status == 2).sum() > 0 and (h.status[:60] == 0).all(), "edge words outside the envelope: status 2"

    ref = hostlib.load_kernel(tmp_path / "double").eval(vectors.from_raw(m, X, "inputs"))
    c = compare(m, r, ref=ref, host=h)
    assert c.host.equal and c.host.to_json() == {"vectors_mismatched": 0, "elements_mismatched": 0}
    assert c.worst_bound_ratio is not None and c.worst_bound_ratio <= 1.0
    latency = json.loads((tmp_path / "rtl" / "rtl.json").read_text())["latency"]
    assert r.work.shape == (len(X),) and r.work.min() == latency  # one start-to-done per vector


@pytest.mark.firmware
def test_host_library_and_emulated_board_agree_bit_for_bit(tmp_path, deadline):
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.link import Link, LinkDevice

    generate(tiny_kernel(), "c-fixed").write(tmp_path / "fixed")
    m = Manifest.load(tmp_path / "fixed")
    X = np.vstack([vectors.draw_raw(m, tmp_path / "fixed", 40, seed=2), _edge_rows(m.n_in)])
    h = hostlib.load_kernel(tmp_path / "fixed").eval(X)
    elf = build(generate_project(tmp_path / "fixed", tmp_path / "proj"), "emulated_f405")
    with Emulator(elf) as emu, Link(emu.url) as link:
        link.check_digest(m.digest)
        board = LinkDevice(link)
        assert isinstance(board, Device) and board.work_unit == "instructions"
        d = board.eval(X)
    assert np.array_equal(d.outputs, h.outputs) and np.array_equal(d.status, h.status)
    assert compare(m, d, host=h).host.equal
    assert d.work.shape == (len(X),) and d.work.min() > 0


def test_bit_exact_sees_one_bit_and_names_it():
    names = ["y[0]", "y[1]"]
    a = np.array([[0.0, 1.5], [2.0, 3.0]])
    b = a.copy()
    b[1, 0] = -0.0 if a[1, 0] == 0 else np.nextafter(a[1, 0], 3.0)
    r = bit_exact(a, [0, 0], b, [0, 0], names)
    assert (r.vectors_mismatched, r.elements_mismatched) == (1, 1) and r.mismatches[0].startswith("vector 1: y[0]")
    z = bit_exact(np.array([[0.0]]), [0], np.array([[-0.0]]), [0], ["z"])  # equal values, other bits
    assert not z.equal
    s = bit_exact(np.array([[7]], dtype=np.int32), [1], [[7]], [0], ["q"], status_name="ap_return", rows=[5])
    assert s.mismatches == ["vector 5: ap_return 1, host model 0"]


def test_bound_ratio_leaves_out_saturated_vectors_and_unbounded_outputs(tmp_path):
    m = Manifest.load(_int32_kernel(tmp_path))
    ref = np.array([[1.0, 2.0], [1.0, 2.0]])
    dev = ref + [[0.5e-9, 2.0**-17], [5.0, 5.0]]  # row 1 is far off but saturated
    assert bound_ratio(m, dev, np.array([0, 1]), ref) == pytest.approx(0.5)
    assert bound_ratio(m, dev, np.array([0, 0]), ref) > 1
    c = compare(m, Evaluation(vectors.to_raw(m, dev, "outputs"), np.array([0, 0]), None),
                ref=Evaluation(ref, np.array([0, 1]), None))
    assert c.status_mismatches == 1 and not c.groups[0].passed


def test_status_checks_judge_each_class_and_name_the_vector():
    """The one status judgement of the harness and the RTL benches (hdl.sim): classes in
    STATUS_CLASSES order, a label's kind before its ':', the allowed statuses per vector."""
    labels = [vectors.OFF_MANIFOLD, f"{vectors.OUT_OF_ENVELOPE}: q below [0, 1]",
              f"{vectors.OUT_OF_ENVELOPE}: q NaN", "domain"]
    checks = status_checks(labels, [(0, 1), (2,), (2,), (0,)], np.array([1, 2, 0, 0]), range(10, 14),
                           status_name="ap_return")
    assert [c["label"] for c in checks] == [c for c in STATUS_CLASSES if c != "motion"]
    dom, env, off = checks
    assert dom["passed"] and off["passed"] and off["expected"] == "0 or 1, no bound check"
    assert env == {"label": vectors.OUT_OF_ENVELOPE, "vectors": 2, "expected": "2", "statuses": {"2": 1, "0": 1},
                   "failures": [f"vector 12 ({vectors.OUT_OF_ENVELOPE}: q NaN): ap_return 0"], "passed": False}


def _int32_kernel(path: Path, domain=None) -> Path:
    path.mkdir(exist_ok=True)
    m = {"model": "m", "prefix": "q", "kernel": "k", "function": "q_k", "target": "c-fixed", "real": "int32",
         "digest": "0" * 64, "model_digest": "1" * 64, "sources": [], "headers": [],
         "inputs": [{"name": "a", "shape": [2], "offset": 0, "size": 2, "range": [[-4, 4], [0, 10]],
                     "frac_bits": [16, 20]}],
         "outputs": [{"name": "r", "shape": [2], "offset": 0, "size": 2, "frac_bits": [16, 16],
                      "error_bound": [1e-9, 2.0**-16]}]}
    if domain is not None:
        m["domain"] = "domain.json"
        (path / "domain.json").write_text(json.dumps({"boxes": domain}))
    (path / "manifest.json").write_text(json.dumps(m))
    return path


def test_vectors_stay_in_the_domain_boxes_and_are_seeded(tmp_path):
    boxes = [[[-4, -3], [0, 1]], [[3, 4], [9, 10]]]
    kdir = _int32_kernel(tmp_path / "k", domain=boxes)
    m = Manifest.load(kdir)
    X = vectors.draw(m, kdir, 500, seed=3)
    inside = [np.all((X >= np.array(b)[:, 0]) & (X <= np.array(b)[:, 1]), axis=1) for b in boxes]
    assert np.all(inside[0] | inside[1]) and inside[0].any() and inside[1].any()
    assert np.array_equal(X, vectors.draw(m, kdir, 500, seed=3))
    R = vectors.draw_raw(m, kdir, 500, seed=3)
    assert R.dtype == np.int32 and np.array_equal(R[:, 1], np.rint(X[:, 1] * 2**20).astype(np.int32))
    (kdir / "domain.json").write_text(json.dumps({"boxes": [[[0, 1]]]}))
    with pytest.raises(vectors.VectorError, match="domain.json: boxes of shape"):
        vectors.draw(m, kdir, 5)


def test_kernel_folder_loader_names_the_folder(tmp_path):
    from mbforge.firmware.project import ProjectError, load_manifest as project_manifest

    with pytest.raises(ManifestError, match="no manifest.json in .*generated kernel directory"):
        load_dir(tmp_path)
    with pytest.raises(hostlib.HostLibError, match="no manifest.json in"):
        hostlib.load_manifest(tmp_path)
    with pytest.raises(ProjectError, match="no manifest.json in"):
        project_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ManifestError, match=f"{tmp_path}: .*not JSON"):
        load_dir(tmp_path)


MODEL_LAYER = ("mbforge.cli", "mbforge.model", "mbforge.examples", "mbforge.kernels", "mbforge.pipeline",
               "mbforge.ir", "mbforge.lower", "mbforge.analysis", "mbforge.backends", "mbforge.reference")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_verification_code_stays_off_the_model_layer():
    verify = sorted((ROOT / "generator" / "verify").glob("*.py"))
    hdl = [ROOT / "hdl" / f for f in ("sim.py", "bench.py", "synth.py")]
    assert len(verify) == 5
    for path in verify + sorted((ROOT / "hil").glob("*.py")) + hdl:
        bad = {n for n in _imports(path) if n.startswith(MODEL_LAYER)}
        if path.parent.name in ("hil", "verify"):
            bad |= {n for n in _imports(path) if n.startswith("mbforge.hdl")}
        if path.parent.name in ("hdl", "verify"):  # the serial link is hil's alone
            bad |= {n for n in _imports(path) if n.startswith("mbforge.hil")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    # and at run time, in a fresh interpreter (a package __init__ could pull them in)
    code = ("import sys, mbforge.hdl.sim, mbforge.hdl.synth, mbforge.verify.hostlib, mbforge.verify.compare;"
            "print(sorted(m for m in sys.modules if m.startswith('mbforge.hil')));"
            "import mbforge.hil.harness;"
            f"print(sorted(m for m in sys.modules if m.startswith({MODEL_LAYER!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "[]"]
