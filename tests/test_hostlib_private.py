"""The host library is never loaded from a place someone else could have chosen (issue 31,
item 8): with the cache off, its folder in the temporary directory is made private (0700)
and refused in one line when it is a symlink, another user's or writable by others; a
library in it that is not the user's, writable by others, a symlink or not the bytes its
build recorded is built again in its place, never loaded. Real gcc, real ctypes."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mbforge.verify import hostlib
from mbforge.verify.hostlib import HostLibError, load_kernel

TOY = Path(__file__).parent / "fixtures" / "toy"
X = np.array([[1.0, 2.0, 3.0], [-0.5, 0.25, 1.0]], dtype=np.float32)

# a library with the batch entry point that answers 42 everywhere: loaded, it shows
PLANTED_C = """
#include <stdint.h>
void mbf_batch(const float *in, float *out, int32_t *status, int64_t n)
{ for (int64_t i = 0; i < 3 * n; i++) out[i] = 42.0f; for (int64_t i = 0; i < n; i++) status[i] = 0; }
"""


def expected(x):
    t0 = x[:, 0] * x[:, 1]
    return np.stack([t0 + x[:, 2], t0 - np.float32(0.5) * x[:, 2], x[:, 0] * x[:, 0] - x[:, 1]], axis=1)


@pytest.fixture
def tmpdir_off(tmp_path, monkeypatch):
    """The cache off and the temporary directory a folder of this test's: the fallback path."""
    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp").chmod(0o1777)
    return tmp_path / "tmp" / f"mbforge-hostlib-{os.getuid()}"


def plant(folder: Path, name: str, mode: int = 0o755) -> Path:
    src = folder / f"{name}.c"
    src.write_text(PLANTED_C)
    lib = folder / name
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    lib.chmod(mode)
    return lib


def library_name(tmp_path: Path) -> str:
    """The name the toy kernel's library gets (built once in a folder of the test's)."""
    os.environ["MBFORGE_CACHE_DIR"] = str(tmp_path / "probe")
    try:
        return hostlib.compile_kernel(TOY).name
    finally:
        os.environ["MBFORGE_CACHE_DIR"] = "off"


def test_the_fallback_folder_is_made_private_and_works(tmpdir_off):
    k = load_kernel(TOY)
    Y, status = k(X)
    assert np.array_equal(Y, expected(X)) and not status.any()
    st = tmpdir_off.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert k.path.parent == tmpdir_off and stat.S_IMODE(k.path.stat().st_mode) & 0o022 == 0
    assert load_kernel(TOY).path == k.path  # used again


@pytest.mark.parametrize("how", ["mode_0777", "symlink", "other_user"])
def test_a_planted_fallback_folder_is_refused_in_one_line(tmpdir_off, tmp_path, how):
    name = library_name(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if how == "mode_0777":
        tmpdir_off.mkdir()
        tmpdir_off.chmod(0o777)
        plant(tmpdir_off, name)
        words = "others can write it (mode 0777)"
    elif how == "symlink":
        plant(elsewhere, name)
        tmpdir_off.symlink_to(elsewhere)
        words = "it is a symlink"
    else:
        if os.getuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        tmpdir_off.mkdir(mode=0o700)
        plant(tmpdir_off, name)
        os.chown(tmpdir_off, 65534, 65534)
        words = "it belongs to uid 65534"
    with pytest.raises(HostLibError) as e:
        load_kernel(TOY)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"refusing the host library folder {tmpdir_off}: {words}"), msg


def test_an_earlier_folder_readable_by_others_is_closed_and_used(tmpdir_off):
    tmpdir_off.mkdir(mode=0o755)
    tmpdir_off.chmod(0o755)
    Y, _ = load_kernel(TOY)(X)
    assert np.array_equal(Y, expected(X)) and stat.S_IMODE(tmpdir_off.stat().st_mode) == 0o700


@pytest.mark.parametrize("how", ["group_writable", "symlink", "unrecorded", "other_user"])
def test_a_planted_library_in_the_folder_is_built_again_not_loaded(tmp_path, monkeypatch, how):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    good = hostlib.compile_kernel(TOY)
    folder, name = good.parent, good.name
    good.unlink()
    if how == "group_writable":
        plant(folder, name, 0o775)
    elif how == "symlink":
        (folder / name).symlink_to(plant(tmp_path, "planted.so"))
    elif how == "unrecorded":  # the user's own file, 0700, but not the bytes its build recorded
        plant(folder, name, 0o700)
    else:
        if os.getuid() != 0:
            pytest.skip("needs root to give a file to another user")
        os.chown(plant(folder, name, 0o755), 65534, 65534)
    k = load_kernel(TOY)
    Y, _ = k(X)
    assert np.array_equal(Y, expected(X)), Y  # not 42: the planted library did not run
    assert k.path == folder / name and not (folder / name).is_symlink()


def test_the_cache_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "hostlib").mkdir(parents=True)
    os.chown(tmp_path / "cache" / "hostlib", 65534, 65534)
    with pytest.raises(HostLibError, match=r"^refusing the host library folder .*hostlib: it belongs to uid 65534"):
        load_kernel(TOY)
    shutil.rmtree(tmp_path / "cache")
