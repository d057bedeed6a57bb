"""No command reaches outside the folder it was given (issue 31, items 1, 3 and 9).

Crafted records (names with `..`, absolute names), symlinks inside the output folder and
unrelated folders are given to the real `mbforge generate` and `mbforge firmware`; every
file outside the folder must keep its bytes, and each refusal is one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.outdir import STAGING_PREFIX, OutDir, OutDirError, interrupted, safe_name

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "toy"


def mbforge(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def refused(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "", "a\\b", "a\x00b", "..", "."])
def test_names_that_leave_the_folder_are_refused(name):
    with pytest.raises(OutDirError):
        safe_name(name)


def test_safe_names_are_normalised():
    assert safe_name("src/./kernel//k.c") == "src/kernel/k.c"
    assert safe_name("a/b/../c") == "a/c"


@pytest.fixture
def victims(tmp_path):
    inside = tmp_path / "victim.txt"
    inside.write_text("precious")
    outside = Path(os.environ.get("TMPDIR", "/tmp")) / f"mbforge-abs-victim-{os.getpid()}.txt"
    outside.write_text("precious too")
    yield inside, outside
    assert inside.read_text() == "precious"
    assert outside.read_text() == "precious too"
    outside.unlink()


def test_firmware_record_naming_files_outside_deletes_nothing(tmp_path, victims):
    """The issue's reproduction: names appended to mbforge-project.json are refused."""
    inside, outside = victims
    proj = tmp_path / "rec" / "proj"
    r = mbforge("firmware", "--kernel", TOY, "--out", proj, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "rec" / "victim.txt").write_text("precious")
    record = proj / "mbforge-project.json"
    d = json.loads(record.read_text())
    d["files"] += ["../victim.txt", str(outside), "src/../../../victim.txt"]
    record.write_text(json.dumps(d))
    line = refused(mbforge("firmware", "--kernel", TOY, "--out", proj, cwd=tmp_path))
    assert "leaves the folder" in line or "absolute" in line, line
    assert (tmp_path / "rec" / "victim.txt").read_text() == "precious"


def test_generate_manifest_naming_files_outside_deletes_nothing(tmp_path, victims):
    inside, outside = victims
    k = tmp_path / "k"
    assert mbforge("generate", "fourbar", "--out", k, cwd=tmp_path).returncode == 0
    m = json.loads((k / "manifest.json").read_text())
    for bad in ("../victim.txt", str(outside)):
        m["sources"] = m["sources"] + [bad]
        (k / "manifest.json").write_text(json.dumps(m))
        line = refused(mbforge("generate", "fourbar", "--prefix", "other", "--out", k, cwd=tmp_path))
        assert "leaves the folder" in line or "absolute" in line, line
        m["sources"] = m["sources"][:-1]


@pytest.mark.parametrize("command", ["generate", "firmware"])
def test_symlink_in_the_folder_is_replaced_not_followed(tmp_path, victims, command):
    inside, _ = victims
    out = tmp_path / "out"
    first = (["generate", "fourbar"] if command == "generate" else ["firmware", "--kernel", TOY])
    assert mbforge(*first, "--out", out, cwd=tmp_path).returncode == 0
    name = "fourbar.c" if command == "generate" else "platformio.ini"
    (out / name).unlink()
    (out / name).symlink_to(inside)
    assert mbforge(*first, "--out", out, cwd=tmp_path).returncode == 0
    assert not (out / name).is_symlink() and (out / name).stat().st_size > 100
    # a symlinked subfolder on the way is refused, not written through
    if command == "firmware":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        os.rename(out / "src", tmp_path / "src_moved")
        (out / "src").symlink_to(elsewhere, target_is_directory=True)
        line = refused(mbforge(*first, "--out", out, cwd=tmp_path))
        assert "symbolic link" in line, line
        assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("command", ["generate", "firmware"])
def test_unrelated_non_empty_folder_needs_force(tmp_path, command):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    first = (["generate", "fourbar"] if command == "generate" else ["firmware", "--kernel", TOY])
    line = refused(mbforge(*first, "--out", out, cwd=tmp_path))
    assert "not empty" in line and "--force" in line, line
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert mbforge(*first, "--out", out, "--force", cwd=tmp_path).returncode == 0
    assert (out / "notes.txt").read_text() == "my notes"


def test_regenerating_with_another_prefix_removes_the_old_kernels_files(tmp_path):
    k = tmp_path / "k"
    assert mbforge("generate", "fourbar", "--out", k, cwd=tmp_path).returncode == 0
    before = {p.name for p in k.iterdir()}
    assert "fourbar.c" in before
    assert mbforge("generate", "fourbar", "--prefix", "fb", "--out", k, cwd=tmp_path).returncode == 0
    after = {p.name for p in k.iterdir()}
    assert "fourbar.c" not in after and "fb.c" in after
    assert after == {n.replace("fourbar.", "fb.") for n in before}


def test_staging_left_by_a_killed_write_is_named_and_then_swept(tmp_path):
    out = OutDir(tmp_path / "o")
    out.write_files({"a.txt": b"1", "rec.json": b"{}"}, record="rec.json")
    left = tmp_path / "o" / (STAGING_PREFIX + "abc")
    left.mkdir()
    (left / "0").write_bytes(b"half")
    assert interrupted(tmp_path / "o") == left.name
    out.write_files({"a.txt": b"2", "rec.json": b"{}"}, record="rec.json", old=["a.txt", "rec.json"])
    assert interrupted(tmp_path / "o") is None
    assert (tmp_path / "o" / "a.txt").read_bytes() == b"2"


def test_a_kernel_folder_cut_off_mid_move_is_reported_as_interrupted(tmp_path):
    """A consumer of a kernel folder whose write was killed between moves says so instead
    of blaming an edit."""
    k = tmp_path / "k"
    assert mbforge("generate", "fourbar", "--out", k, cwd=tmp_path).returncode == 0
    (k / "fourbar.c").write_text("/* a newer kernel, moved in before the kill */\n")
    (k / (STAGING_PREFIX + "x1")).mkdir()
    line = refused(mbforge("firmware", "--kernel", k, "--out", tmp_path / "fw", cwd=tmp_path))
    assert "interrupted" in line, line
    assert not (tmp_path / "fw").exists()
