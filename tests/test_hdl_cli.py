"""`mbforge hdl` through its register() hook: generate, simulate, compare, report."""
import argparse
import json

import pytest

from mbforge.hdl import cli

pytestmark = pytest.mark.hdl


def _run(argv):
    ap = argparse.ArgumentParser(prog="mbforge")
    sub = ap.add_subparsers(dest="command", required=True)
    cli.register(sub)
    args = ap.parse_args(argv)
    return args.func(args)


def test_hdl_command_generates_simulates_and_reports(tmp_path, capsys):
    out = tmp_path / "fb"
    rc = _run(["hdl", "fourbar", "--kernel", "equations", "--sim", "icarus", "--variant", "shared",
               "--multipliers", "2", "--vectors", "20", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "PASS" in text and "bit-exact" in text and "synthesis of fourbar_equations_hw" in text
    for d in ("rtl", "hls", "fixed", "double"):
        assert (out / d / "manifest.json").exists()
    rep = json.loads((out / "rtl" / "synth_report.json").read_text())
    assert rep["rtl"]["multipliers"] == 2


def test_input_check_off_reaches_the_rtl_and_its_models(tmp_path, capsys):
    """--input-check off (a design whose caller validates its inputs: the four-bar's
    kinematics then fits an iCE40 UP5K, docs/kernels.md) goes to rtl/, hls/ and the bit-exact
    host model fixed/ alike: none returns status 2, and the robustness set has no out-of-envelope vectors to expect a 2 from."""
    out = tmp_path / "fb"
    rc = _run(["hdl", "fourbar", "--kernel", "equations", "--variant", "shared", "--multipliers", "1",
               "--input-check", "off", "--vectors", "10", "--no-synth", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "PASS" in text and "bit-exact" in text, text
    for d in ("rtl", "hls", "fixed"):
        assert "2" not in json.loads((out / d / "manifest.json").read_text())["status_codes"], d
    assert "out of envelope" not in text
    rc = _run(["hdl", "fourbar", "--kernel", "equations", "--variant", "shared", "--multipliers", "1",
               "--vectors", "10", "--no-synth", "--out", str(tmp_path / "on")])
    text = capsys.readouterr().out
    assert rc == 0 and "out of envelope (expected 2)" in text  # the default checks, and is checked


@pytest.mark.needs("yosys")
def test_a_design_that_fits_no_part_closes_with_the_step_that_failed(tmp_path, capsys):
    """The pendulum's pipelined equations need 16 SB_MAC16 (real synth_ice40 -dsp): the run
    simulates (PASS) and ends with one line naming the failed step, the part and why; exit 1."""
    rc = _run(["hdl", "pendulum", "--vectors", "5", "--no-synth", "--pnr", "ice40-up5k", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 1 and any("PASS" in line for line in lines)
    assert lines[-1].startswith("mbforge hdl: failed: place and route: fit failed on iCE40 UP5K: ")
    assert lines[-1].endswith(" DSPs for 8") and "RTL simulation" not in lines[-1]


def test_vectors_beyond_the_envelope_pool_are_fresh_distinct_states(tmp_path, capsys):
    """The four-bar's equations over its envelope: the motion file holds 48 consistent
    states; --vectors 60 and 120 draw that many distinct ones afresh over the envelope
    (not the 48 again with replacement), the motion's after them. Chunks seeded from
    (seed, k): the 60 are the first of the 120, so the worst error / bound cannot drop."""
    reps = {}
    for n in (60, 120):
        out = tmp_path / str(n)
        rc = _run(["hdl", "fourbar", "--kernel", "equations", "--variant", "shared", "--vectors", str(n),
                   "--seed", "7", "--no-synth", "--out", str(out)])
        text = capsys.readouterr().out
        assert rc == 0, text
        assert f"{n} distinct consistent states drawn afresh" in text, text
        reps[n] = json.loads((out / "rtl" / "sim_report.json").read_text())
        assert reps[n]["distinct"] >= n and reps[n]["bit_exact"] and reps[n]["within_bound"], reps[n]
        assert f"({reps[n]['distinct']} distinct in the domain)" in text
    assert reps[120]["worst_error_ratio"] >= reps[60]["worst_error_ratio"]
    assert reps[120]["vectors"] - reps[60]["vectors"] == 60  # the same motion and robustness set after them


def test_search_for_the_worst_error_bound_goes_to_the_rtl_and_the_report(tmp_path, capsys):
    """--search: a local search over the four-bar's envelope from the worst of 200 drawn
    consistent states, on the c-fixed host model; the states it ends on are simulated in
    the RTL (bit-exact), so the RTL's worst error / bound is at least the search's."""
    out = tmp_path / "s"
    rc = _run(["hdl", "fourbar", "--kernel", "equations", "--variant", "shared", "--vectors", "20",
               "--search", "200", "--seed", "7", "--no-synth", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    rep = json.loads((out / "rtl" / "sim_report.json").read_text())
    s = rep["search"]
    assert s["states"] == 200 and s["searched"] == 16 and len(s["worst_state"]) == 9
    assert 0 < s["worst_error_ratio_drawn"] <= s["worst_error_ratio"] <= 1
    assert rep["bit_exact"] and rep["worst_error_ratio"] >= s["worst_error_ratio"] * (1 - 1e-12)
    assert f"worst error / bound on the c-fixed host model {s['worst_error_ratio']:.3g}" in text
