"""The manifest carries the sha256 of every file it describes, and the firmware generator
and `mbforge hil` refuse a kernel whose files changed since generation."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.manifest import Manifest, ManifestError, sha256_hex

FIXTURES = Path(__file__).parent / "fixtures"
TOY = FIXTURES / "toy"


def mbforge(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """fourbar kinematics, c-float32 (C, motion and domain files) and its c-double reference."""
    root = tmp_path_factory.mktemp("integrity")
    for target in ("c-float32", "c-double"):
        r = mbforge("generate", "fourbar", "--kernel", "kinematics", "--target", target, "--out", root / target)
        assert r.returncode == 0, r.stderr
    return root


def test_manifest_hashes_every_described_file(kernels):
    k = kernels / "c-float32"
    m = Manifest.load(k)
    assert set(m.files) == {*m.sources, *m.headers, "motion.json", "domain.json"}
    for name, h in m.files.items():
        assert sha256_hex((k / name).read_bytes()) == h
    m.check_files(k)  # unchanged: accepted


def test_older_manifests_are_read_and_bad_maps_named(tmp_path):
    m = Manifest.load(TOY)  # written before `files` existed
    assert m.files is None
    m.check_files(TOY)  # nothing to check
    d = json.loads((TOY / "manifest.json").read_text())
    with pytest.raises(ManifestError, match="files map lists"):
        Manifest.from_dict(d | {"files": {"toy.c": "0" * 64}})
    with pytest.raises(ManifestError, match="'toy.h' has no sha256"):
        Manifest.from_dict(d | {"files": {"toy.c": "0" * 64, "toy.h": "xyz"}})


def edited(kernels, tmp_path) -> Path:
    """A copy of the float kernel with one constant of its C changed."""
    k = shutil.copytree(kernels / "c-float32", tmp_path / "edited")
    src = k / Manifest.load(k).sources[0]
    text = src.read_text()
    new = text.replace("0.5f", "0.5000001f", 1)
    assert new != text
    src.write_text(new)
    return k


def one_line_naming(r: subprocess.CompletedProcess, path: Path) -> None:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stdout, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err and "changed since it was generated" in err, err


def test_firmware_refuses_an_edited_kernel(kernels, tmp_path):
    k = edited(kernels, tmp_path)
    r = mbforge("firmware", "--kernel", k, "--out", tmp_path / "proj")
    one_line_naming(r, k / Manifest.load(k).sources[0])
    assert not (tmp_path / "proj").exists()
    # the same folder unedited is accepted
    assert mbforge("firmware", "--kernel", kernels / "c-float32", "--out", tmp_path / "ok").returncode == 0


@pytest.mark.host
def test_hil_host_model_refuses_an_edited_kernel(kernels, tmp_path):
    """Refused before any device is asked (the port is never opened)."""
    k = edited(kernels, tmp_path)
    r = mbforge("hil", "--port", "socket://127.0.0.1:9", "--kernel", k, "--reference", kernels / "c-double",
                "--host-model", "--vectors", "5", "--timeout", "1")
    one_line_naming(r, k / Manifest.load(k).sources[0])
    # an edited motion file of the reference is refused too
    ref = shutil.copytree(kernels / "c-double", tmp_path / "ref")
    motion = json.loads((ref / "motion.json").read_text())
    motion["vectors"][0][0] += 1e-3
    (ref / "motion.json").write_text(json.dumps(motion))
    r = mbforge("hil", "--port", "socket://127.0.0.1:9", "--kernel", kernels / "c-float32", "--reference", ref,
                "--host-model", "--vectors", "5", "--timeout", "1")
    one_line_naming(r, ref / "motion.json")
