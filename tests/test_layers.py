"""The suite's own rules (tests/conftest.py), run on a small test file in a separate pytest:
a tool the bootstrap installs that is missing skips a test on a workstation and fails it
under CI; `firmware` and `hdl` tests are in the slow layer."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SAMPLE = '''
import pytest

@pytest.mark.needs("mbforge-no-such-tool")
def test_missing_tool():
    pass

@pytest.mark.needs(modules=("mbforge_no_such_module",))
def test_missing_module():
    pass

@pytest.mark.needs("sh", modules=("json",))
def test_present():
    pass

@pytest.mark.firmware
def test_on_a_board():
    pass

@pytest.mark.hdl
def test_in_rtl():
    pass
'''


def run_sample(tmp_path: Path, ci: str | None, *args: str) -> tuple[int, str]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(TESTS)
    if ci is not None:
        env["CI"] = ci
    # tests/conftest.py as a plugin, markers registered as in pyproject.toml
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "conftest", "-p", "no:cacheprovider",
                           "-o", "markers=firmware\nhdl\nslow", *args, "test_sample.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_missing_tool_skips_on_a_workstation(tmp_path):
    code, out = run_sample(tmp_path, None)
    assert code == 0, out
    assert ": needs mbforge-no-such-tool (scripts/bootstrap.sh installs it)" in out
    assert ": needs mbforge_no_such_module (scripts/bootstrap.sh installs it)" in out
    assert "PASSED test_sample.py::test_present" in out
    assert "3 passed, 2 skipped" in out, out


def test_a_missing_tool_fails_under_ci(tmp_path):
    code, out = run_sample(tmp_path, "true")
    assert code == 1, out
    assert "ERROR test_sample.py::test_missing_tool" in out and "ERROR test_sample.py::test_missing_module" in out
    assert "needs mbforge-no-such-tool (scripts/bootstrap.sh installs it): missing under CI" in out
    assert "3 passed, 2 errors" in out, out
    for off in ("", "0", "false"):  # CI set to a false value is no CI
        code, out = run_sample(tmp_path, off)
        assert code == 0 and "3 passed, 2 skipped" in out, (off, out)


def test_firmware_and_hdl_tests_are_in_the_slow_layer(tmp_path):
    _, out = run_sample(tmp_path, None, "-m", "not slow")
    assert "1 passed, 2 skipped, 2 deselected" in out, out
    _, out = run_sample(tmp_path, None, "-m", "slow")
    assert "2 passed, 3 deselected" in out, out
