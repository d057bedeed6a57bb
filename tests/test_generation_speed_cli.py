"""`mbforge generate --verbose` reports the command's time by stage without changing what it
writes; the generate-only parser parses as the full one; bench.command runs (its numbers
are read, not asserted: no timed tests)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
STAGES = ["import", "model build", "equations", "kernel", "lower", "analysis", "motion", "render", "write", "total"]


def _generate(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "fourbar", "--kernel", "equations",
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=300)


def test_verbose_prints_one_line_per_stage_and_the_same_files(tmp_path):
    quiet, loud = _generate(tmp_path / "q"), _generate(tmp_path / "v", "--verbose")
    assert quiet.returncode == 0 and loud.returncode == 0, loud.stderr
    assert quiet.stderr == "" and loud.stdout.replace(str(tmp_path / "v"), "") == quiet.stdout.replace(str(tmp_path / "q"), "")
    lines = loud.stderr.splitlines()
    assert [re.match(r"mbforge generate: (.+?) +\d+\.\d{3} s$", ln).group(1) for ln in lines] == STAGES
    seconds = [float(ln.split()[-2]) for ln in lines]
    assert abs(sum(seconds[:-1]) - seconds[-1]) < 0.01, "the stages add up to the total"
    assert seconds[0] > 0, "the interpreter's start and the imports are counted"
    for f in (tmp_path / "q").iterdir():
        assert (tmp_path / "v" / f.name).read_bytes() == f.read_bytes()


def test_generate_only_parser_parses_as_the_full_one(tmp_path):
    argv = ["generate", "stewart", "--kernel", "kinematics", "--target", "c-fixed", "--prefix", "p",
            "--set", "motion=yaw", "--out", str(tmp_path), "--verbose"]
    full, alone = build_parser().parse_args(argv), build_parser("generate").parse_args(argv)
    assert {k: v for k, v in vars(full).items() if k != "func"} == {k: v for k, v in vars(alone).items() if k != "func"}
    assert full.func is alone.func


@pytest.mark.slow
def test_command_bench_runs():
    r = subprocess.run([sys.executable, "-m", "bench.command", "--runs", "1", "--model", "fourbar"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "median of 1: wall" in r.stdout and "wall / goal 0.6 s" in r.stdout and "  motion " in r.stdout
