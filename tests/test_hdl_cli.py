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
