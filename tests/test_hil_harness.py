"""`mbforge hil` end to end on the toy kernel in QEMU against its double reference, and
the host kernel library it is built on."""
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbforge.firmware.qemu import Emulator
from mbforge.verify import hostlib
from mbforge.hil.cli import main as hil_cli
from mbforge.manifest import Manifest

FIXTURES = Path(__file__).parent / "fixtures"
TOY, TOY_DOUBLE, TOY_WRONG = FIXTURES / "toy", FIXTURES / "toy_double", FIXTURES / "toy_double_wrong"


pytestmark = pytest.mark.usefixtures("deadline")  # conftest.deadline


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """`mbforge hil` keeps its run database in the current folder by default."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def device(toy_firmware):
    with Emulator(toy_firmware("emulated_f405")[1]) as emu:
        yield emu.url


def edited_copy(src: Path, dst: Path, **changes) -> Path:
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m.update(changes)
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.firmware
def test_hil_passes_against_the_double_reference(device, tmp_path, capsys):
    report = tmp_path / "report.json"
    code = hil_cli(["--port", device, "--kernel", str(TOY), "--reference", str(TOY_DOUBLE),
                    "--vectors", "300", "--seed", "4", "--host-model", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS" in out and "instructions" in out
    r = json.loads(report.read_text())
    assert r["passed"] is True and r["vectors"] == 300
    y = r["outputs"]["y"]
    assert 0 < y["max_rel_error"] < 1e-5 and y["scale"] > 1 and y["max_abs_error"] > 0
    w = r["work_per_call"]
    assert (w["min"], w["median"], w["max"], w["unit"]) == (17, 17, 17, "instructions")
    assert r["host_model"] == {"vectors_mismatched": 0, "elements_mismatched": 0}


@pytest.mark.firmware
def test_hil_fails_against_a_different_reference(device, capsys):
    code = hil_cli(["--port", device, "--kernel", str(TOY), "--reference", str(TOY_WRONG), "--vectors", "50"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL" in out


@pytest.mark.firmware
def test_hil_fails_when_tolerance_is_tighter_than_float(device, capsys):
    code = hil_cli(["--port", device, "--kernel", str(TOY), "--reference", str(TOY_DOUBLE),
                    "--vectors", "100", "--tol", "1e-12"])
    assert code == 1 and "FAIL" in capsys.readouterr().out


@pytest.mark.firmware
def test_hil_refuses_a_device_with_another_digest(device, tmp_path, capsys):
    kernel = edited_copy(TOY, tmp_path / "k", digest="ab" * 32)
    code = hil_cli(["--port", device, "--kernel", str(kernel), "--reference", str(TOY_DOUBLE), "--vectors", "5"])
    err = capsys.readouterr().err
    assert code == 2
    assert "ab" * 32 in err and Manifest.load(TOY).digest in err and "refusing to compare" in err


@pytest.mark.firmware
def test_hil_with_motion_vectors(device, tmp_path, capsys):
    kernel = edited_copy(TOY, tmp_path / "k", motion="motion.json")
    (kernel / "motion.json").write_text(json.dumps({"vectors": [[0.1, 0.2, 0.3], [1.0, -1.0, 2.0]]}))
    report = tmp_path / "r.json"
    code = hil_cli(["--port", device, "--kernel", str(kernel), "--reference", str(TOY_DOUBLE),
                    "--vectors", "10", "--json", str(report)])
    assert code == 0, capsys.readouterr().out
    assert json.loads(report.read_text())["vectors"] == 12


@pytest.mark.firmware
def test_hil_says_how_many_vectors_are_distinct(device, tmp_path, capsys):
    """On a kernel with an operating envelope `draw` picks the random vectors from the
    motion file's states (with replacement): the report says how many are distinct."""
    kernel = edited_copy(TOY, tmp_path / "k", motion="motion.json", envelope={"source": "test"})
    (kernel / "motion.json").write_text(json.dumps({"vectors": [[0.1, 0.2, 0.3], [1.0, -1.0, 2.0]]}))
    report = tmp_path / "r.json"
    code = hil_cli(["--port", device, "--kernel", str(kernel), "--reference", str(TOY_DOUBLE),
                    "--vectors", "10", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    r = json.loads(report.read_text())
    assert (r["vectors"], r["distinct"]) == (12, 2) and "12 vectors (2 distinct)" in out, out


def test_hil_refuses_another_model(tmp_path, capsys):
    ref = edited_copy(TOY_DOUBLE, tmp_path / "ref", model_digest="9" * 64)
    code = hil_cli(["--port", "socket://127.0.0.1:1", "--kernel", str(TOY), "--reference", str(ref)])
    err = capsys.readouterr().err
    assert code == 2 and "model_digest" in err and "9" * 64 in err


def test_hil_refuses_a_reference_that_is_not_double(capsys):
    code = hil_cli(["--port", "socket://127.0.0.1:1", "--kernel", str(TOY), "--reference", str(TOY)])
    assert code == 2 and "must be c-double" in capsys.readouterr().err


def test_hil_missing_manifest_is_a_clear_error(tmp_path, capsys):
    code = hil_cli(["--port", "socket://127.0.0.1:1", "--kernel", str(tmp_path), "--reference", str(TOY_DOUBLE)])
    assert code == 2 and "no manifest.json" in capsys.readouterr().err


# ---- hostlib ------------------------------------------------------------------------

@pytest.mark.host
def test_host_kernels_float_and_double():
    X = np.array([[1.0, 2.0, 3.0], [0.5, -0.25, 1.0]])
    yf, sf = hostlib.load_kernel(TOY)(X)
    yd, sd = hostlib.load_kernel(TOY_DOUBLE)(X)
    assert yf.dtype == np.float32 and yd.dtype == np.float64
    assert yd.tolist() == [[5.0, 0.5, -1.0], [0.875, -0.625, 0.5]]
    assert np.array_equal(yf, yd.astype(np.float32)) and sf.tolist() == sd.tolist() == [0, 0]
    # two kernels with the same C function name side by side, each its own
    yw, _ = hostlib.load_kernel(TOY_WRONG)(X)
    assert yw[0, 1] == 1.25 and yd[0, 1] == 0.5


@pytest.mark.host
def test_host_kernel_batch_is_fast():
    k = hostlib.load_kernel(TOY_DOUBLE)
    X = np.random.default_rng(0).random((100_000, 3))
    Y, status = k(X)
    assert Y.shape == (100_000, 3) and not status.any()
    assert np.allclose(Y[:, 0], X[:, 0] * X[:, 1] + X[:, 2])


def int32_kernel(path: Path) -> Path:
    path.mkdir()
    (path / "q.h").write_text("#include <stdint.h>\nint q_mac(const int32_t *in, int32_t *out);\n")
    (path / "q.c").write_text(
        '#include "q.h"\n'
        "/* Q16.16: out0 = in0 + in1, out1 = (in0 * in1) >> 16; status 1 on overflow */\n"
        "int q_mac(const int32_t *in, int32_t *out)\n{\n"
        "    int64_t s = (int64_t)in[0] + in[1];\n"
        "    out[0] = (int32_t)s;\n"
        "    out[1] = (int32_t)(((int64_t)in[0] * in[1]) >> 16);\n"
        "    return s > INT32_MAX || s < INT32_MIN;\n}\n")
    m = json.loads((TOY / "manifest.json").read_text())
    m.update(function="q_mac", real="int32", target="c-fixed32", sources=["q.c"], headers=["q.h"],
             inputs=[{"name": "a", "shape": [2], "offset": 0, "size": 2, "range": [[-4, 4], [-4, 4]],
                      "frac_bits": [16, 16]}],
             outputs=[{"name": "r", "shape": [2], "offset": 0, "size": 2, "frac_bits": [16, 16],
                       "error_bound": [1e-9, 2.0**-16]}])
    (path / "manifest.json").write_text(json.dumps(m))
    return path


@pytest.mark.host
def test_host_kernel_fixed_point(tmp_path):
    kdir = int32_kernel(tmp_path / "q")
    m = Manifest.load(kdir)
    raw = hostlib.to_raw(m, [[1.5, -0.25]])
    assert raw.dtype == np.int32 and raw.tolist() == [[98304, -16384]]
    # never clipped: a value the Q format cannot hold is refused, named with its value
    with pytest.raises(hostlib.VectorError, match=r"input a\[1\] = 40000.0 \(vector 1\) is outside its "
                                                  r"fixed-point format \(frac_bits 16: \[-32768, 32768\]\)"):
        hostlib.to_raw(m, [[1.5, -0.25], [0.0, 40000.0]])
    with pytest.raises(hostlib.VectorError, match=r"input a\[0\] = nan"):
        hostlib.to_raw(m, [[np.nan, 0.0]])
    raw = np.vstack([raw, [[2**31 - 1, 2**31 - 1]]]).astype(np.int32)  # the largest words saturate
    Y, status = hostlib.load_kernel(kdir)(raw)
    assert hostlib.from_raw(m, Y)[0].tolist() == [1.25, -0.375]
    assert status.tolist() == [0, 1]


@pytest.mark.host
def test_host_compile_error_is_reported(tmp_path):
    kdir = edited_copy(TOY, tmp_path / "broken")
    (kdir / "toy.c").write_text("int toy_affine(const float *in, float *out) { return syntax error; }\n")
    with pytest.raises(hostlib.HostLibError, match="compiling .* for the host failed"):
        hostlib.load_kernel(kdir)


def test_fixed_point_tolerance_is_the_manifest_error_bound(tmp_path):
    from mbforge.hil.harness import compare_groups

    m = Manifest.load(int32_kernel(tmp_path / "q"))
    ref = np.array([[1.0, 2.0], [3.0, -4.0]])
    within = ref + [[0.0, 2.0**-17], [0.0, -(2.0**-16)]]
    [g] = compare_groups(m, within, ref, tol=None)
    assert g.passed and g.tolerance_kind == "error_bound" and g.max_abs_error == 2.0**-16
    beyond = ref + [[1e-6, 0.0], [0.0, 0.0]]  # r[0] allows only 1e-9
    [g] = compare_groups(m, beyond, ref, tol=None)
    assert not g.passed and g.worst_element == "r[0]" and g.worst_vector == 0
    [g] = compare_groups(m, beyond, ref, tol=1e-3)  # --tol overrides: relative to scale 4
    assert g.passed and g.scale == 4.0


@pytest.mark.firmware
def test_run_database_gives_the_report_again(device, tmp_path, capsys):
    from mbforge.hil.harness import load_run

    report, run = tmp_path / "r.json", tmp_path / "r.hil.sqlite"
    assert hil_cli(["--port", device, "--kernel", str(TOY), "--reference", str(TOY_DOUBLE), "--vectors", "120",
                    "--host-model", "--json", str(report), "--run", str(run)]) == 0
    first, again = json.loads(report.read_text()), load_run(run)
    for key in ("outputs", "vectors", "passed", "work_per_call", "raw_ticks", "status_mismatches", "host_model",
                "vectors_missing"):
        assert again[key] == first[key], key
    assert again["link"]["sessions"] == 1 and again["link"]["batch"] >= 1
    assert again["link"]["seconds_per_vector"] > 0 and again["run"]["state"] == "complete"
    # a finished run resumed evaluates nothing and reports the same
    capsys.readouterr()
    assert hil_cli(["--port", device, "--resume", str(run)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert load_run(run)["outputs"] == first["outputs"]


@pytest.mark.parametrize("args, message", [
    (["--vectors", "-5"], "--vectors must be a whole number from 0 to 1000000, got -5"),
    (["--json", "no/such/folder/r.json"], "folder no/such/folder does not exist"),
    (["--run", "no/such/folder/r.hil.sqlite"], "folder no/such/folder does not exist"),
])
def test_hil_bad_options_are_one_line(args, message, capsys):
    code = hil_cli(["--port", "socket://127.0.0.1:1", "--kernel", str(TOY), "--reference", str(TOY_DOUBLE), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_hil_resume_of_no_run_is_one_line(tmp_path, capsys):
    assert hil_cli(["--port", "socket://127.0.0.1:1", "--resume", str(tmp_path / "none.hil.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "no run database at" in err and err.count("\n") == 1


def test_hil_resume_of_a_file_that_is_no_run_is_one_line(tmp_path, capsys):
    (tmp_path / "x.hil.sqlite").write_text("not a database")
    assert hil_cli(["--port", "socket://127.0.0.1:1", "--resume", str(tmp_path / "x.hil.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "not a readable run database" in err and err.count("\n") == 1


@pytest.fixture
def silent_port():
    """socket://... of a TCP server that accepts a connection and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    yield f"socket://127.0.0.1:{srv.getsockname()[1]}"
    srv.close()


def _hil(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mbforge.cli", "hil", *map(str, args)],
                          capture_output=True, text=True, timeout=100)


@pytest.mark.firmware
@pytest.mark.parametrize("dead, message", [("refused", "cannot open socket://127.0.0.1:1"),
                                           ("silent", "no reply to HELLO")])
def test_a_start_that_fails_leaves_no_run_database(dead, message, silent_port, toy_firmware, tmp_path):
    """Issue 31 item 5: a start that fails before the device answers (nothing listens; a
    port that never answers) leaves no run database, so the same command with the right
    port then runs (it refused: "run database r.sqlite already exists")."""
    from mbforge.hil.harness import load_run

    run = tmp_path / "r.sqlite"
    same = ["--kernel", TOY, "--reference", TOY_DOUBLE, "--vectors", 50, "--timeout", 1, "--run", run]
    failed = _hil("--port", "socket://127.0.0.1:1" if dead == "refused" else silent_port, *same)
    err = failed.stderr
    assert failed.returncode == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--resume" not in err and not list(tmp_path.glob("r.sqlite*"))
    with Emulator(toy_firmware("emulated_f405")[1]) as emu:
        ok = _hil("--port", emu.url, *same)
    assert ok.returncode == 0, ok.stderr + ok.stdout
    r = load_run(run)
    assert r["passed"] and r["run"]["state"] == "complete" and r["link"]["sessions"] == 1
