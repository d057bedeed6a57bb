"""bench.before_after: one checkout against itself is byte-identical with the same counts;
a kernel edited in a comment, in its code or in its bound is told apart."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.before_after import _code, compare, kind, summary

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_checkout_against_itself(tmp_path):
    # a checkout whose .venv is this interpreter's: the script runs the CLI found there
    co = tmp_path / "co"
    co.mkdir()
    (co / ".venv").symlink_to(Path(sys.executable).parent.parent)
    r = subprocess.run([sys.executable, "-m", "bench.before_after", "--before", str(co), "--after", str(co),
                        "--json", str(tmp_path / "r.json"), "--md", str(tmp_path / "r.md"),
                        "--only", "fourbar/equations/c-fixed"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    row = rep["cases"]["fourbar/equations/c-fixed"]
    assert kind(row) == "byte-identical" and row["bound_change"] == "same"
    assert row["instructions_change"] == "same" and row["instructions"][0] > 100
    assert "| fourbar/equations/c-fixed | byte-identical" in (tmp_path / "r.md").read_text()


def _rec(src: str, bound: float, instr: float) -> dict:
    import hashlib
    h = lambda t: hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
    return {"files": {"k.c": h(src)}, "code": {"k.c": h(_code(src))}, "ops": 3, "bounds": {"y": bound},
            "bound": bound, "instructions": instr, "seconds": 0}


def test_comment_code_and_bound_told_apart():
    src = "/* kernel */\nint k(void) {\n    return 1; // one\n}\n"
    before = {"m/equations/c-fixed": _rec(src, 1e-6, 50.0)}
    after = {"m/equations/c-fixed": _rec(src.replace("kernel", "the kernel"), 1e-6, 50.0)}
    assert kind(compare(before, after)["m/equations/c-fixed"]) == "same code"
    after = {"m/equations/c-fixed": _rec(src.replace("return 1", "return 2"), 2e-6, 49.0)}
    row = compare(before, after)["m/equations/c-fixed"]
    assert kind(row) == "code differs" and row["differences"] == ["k.c differs"]
    s = summary({"m/equations/c-fixed": row})["c-fixed"]
    assert s["bound looser"] == 1 and s["instr fewer"] == 1 and s["code differs"] == 1
    after = {"m/equations/c-fixed": {"refused": "2: error: no", "seconds": 0}}
    assert kind(compare(before, after)["m/equations/c-fixed"]) == "refusal changed"
