"""Never silent about bounds (issue 33, item 6 of its list of what must hold: "a missing or
uselessly large bound is a warning on the console naming the output and the reason;
--require-bounds turns it into an error"): analysis.boundnotes judges, `mbforge generate`
warns in one line per kernel and notes it in the header, --require-bounds refuses and
writes nothing."""
from __future__ import annotations

import subprocess
import sys

from mbforge.analysis.boundnotes import bound_summary, weak_bounds


def mbforge(*args):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_judgement():
    labels = ["a", "b", "c", "d", "res"]
    # a: fine; b: missing; c: inf; d: bound above its magnitude; res: a residual, 0 up to rounding
    missing, useless = weak_bounds(labels, [1e-6, None, float("inf"), 30.0, 1e-7], [2.0, 5.0, 5.0, 4.0, 1e-16])
    assert [w.label for w in missing] == ["b", "c"] and [w.label for w in useless] == ["d"]
    line = bound_summary(labels, [1e-6, None, float("inf"), 30.0, 1e-7], [2.0, 5.0, 5.0, 4.0, 1e-16])
    assert line.startswith("2 of 5 outputs have no error bound") and "d +-30 (|value| up to 4)" in line
    assert bound_summary(labels, None, None) is None  # c-double: no bounds, nothing to say
    assert bound_summary(["a", "b", "c", "d", "e"], [None] * 5, None).endswith("a, b, c and 2 more")


def test_missing_bound_warns_and_require_bounds_refuses(tmp_path):
    # the slider-crank with a disc without its operating envelope: over the declared box of its
    # coordinates the forward dynamics divides by a pivot whose enclosure reaches 0
    args = ("generate", "slidercrank_disc", "--set", "envelope=False", "--kernel", "forward-dynamics", "--target",
            "c-float32")
    r = mbforge(*args, "--out", tmp_path / "warned")
    assert r.returncode == 0, r.stderr
    warn = [l for l in r.stderr.splitlines() if "warning" in l]
    assert len(warn) == 1 and "7 of 7 outputs have no error bound" in warn[0] and "phi1_dd" in warn[0], r.stderr
    header = (tmp_path / "warned" / "slidercrank_disc.c").read_text()
    assert "Error bounds: 7 of 7 outputs have no error bound" in header
    r = mbforge(*args, "--require-bounds", "--out", tmp_path / "refused")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "error:" in lines[0] and "--require-bounds" in lines[0], r.stderr
    assert not (tmp_path / "refused").exists()


def test_useless_bound_warns(tmp_path):
    # the delta robot's forward dynamics in fixed point: bounds of 1e5 m/s^2 on accelerations of 50
    # (the first shipped model, x and y within +-0.2 m: workspace=first)
    r = mbforge("generate", "delta", "--set", "workspace=first", "--kernel", "forward-dynamics", "--target",
                "c-fixed", "--require-bounds", "--out", tmp_path / "fd")
    assert r.returncode == 2 and "outputs have a bound at least their largest magnitude" in r.stderr, r.stderr
    assert "P_x_dd +-" in r.stderr and not (tmp_path / "fd").exists()


def test_clean_kernels_do_not_warn(tmp_path):
    # the delta's inverse dynamics (the first shipped model: bounds 1e-3 of the torques), its
    # reduced inverse dynamics over the declared workspace of issue 33 and the four-bar's
    # kinematics (whose constraint residuals are 0 up to rounding: not judged)
    for model, kernel, opts in (("delta", "inverse-dynamics", ("--set", "workspace=first")),
                                ("delta", "inverse-dynamics-reduced", ()), ("fourbar", "kinematics", ())):
        out = tmp_path / f"{model}-{kernel}"
        r = mbforge("generate", model, *opts, "--kernel", kernel, "--target", "c-float32", "--require-bounds",
                    "--out", out)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        assert "Error bounds:" not in (out / f"{model}.c").read_text()


def test_a_kernel_without_test_vectors_is_judged_at_states_over_its_ranges(tmp_path):
    # the 6-R arm's ABA in fixed point (its articulated inertias bounded backward,
    # analysis.ababack; the bias and acceleration passes op by op): sound, 6.4e8 rad/s^2 on
    # accelerations of at most a few thousand; it has no test vectors, so judged at states
    # over its ranges (|qdd| up to 858 there). Its forward dynamics by CRBA and LDL^T
    # (analysis.ldlback, ||x|| bounded through sqrt(b^T M^-1 b)): 139, useful, generated
    r = mbforge("generate", "sample_arm", "--kernel", "forward-dynamics-aba", "--target", "c-fixed",
                "--require-bounds", "--out", tmp_path / "fd")
    assert r.returncode == 2 and "6 of 6 outputs have a bound at least their largest magnitude" in r.stderr, r.stderr
    assert "shoulder1_dd +-" in r.stderr and not (tmp_path / "fd").exists()
    r = mbforge("generate", "sample_arm", "--kernel", "forward-dynamics", "--target", "c-fixed", "--require-bounds",
                "--out", tmp_path / "fd")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
