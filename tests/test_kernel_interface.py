"""What a controller sees of a kernel (issue 33, item 3): no input that no output depends on
(t of a time-independent model is not an input, so real time never meets a simulated
motion's range), outputs and inputs named in the header (#defines of their indices and,
for c-fixed, of their Q formats) and in the manifest and reports, the declared range and
the cover's enclosure of each input both in the manifest, and simulate's plot titles."""
import re
import subprocess

import numpy as np
import pytest

from mbforge.examples.loader import load
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.simulate.cli import _panels

from helpers.builds import MBFORGE


def test_t_of_a_time_independent_model_is_not_an_input():
    eqs = load("slidercrank").equations()
    k = build_kernel(eqs, "inverse-dynamics")
    assert [p.name for p in k.inputs] == ["q", "qd", "qdd"] and eqs.t not in k.input_symbols
    n = len(k.input_symbols)
    assert {len(r) for r in k.motion} == {n} and {len(b) for b in k.domain} == {n}
    # a kernel whose outputs do depend on t keeps it (the driven crank of the kinematics)
    kin = build_kernel(eqs, "kinematics")
    assert [p.name for p in kin.inputs] == ["q", "t"]


def test_dropped_columns_are_the_unused_inputs():
    from mbforge.kernels.dynamics import inverse_dynamics_kernel

    eqs = load("slidercrank").equations()
    whole = inverse_dynamics_kernel(eqs)
    assert [p.name for p in whole.inputs][-1] == "t"  # the builder's own ports
    k = whole.without_unused_inputs()
    assert np.array_equal(np.array(k.motion), np.array(whole.motion)[:, :-1])
    assert np.array_equal(np.array(k.domain), np.array(whole.domain)[:, :-1, :])


@pytest.fixture(scope="module")
def fixed_kernel(tmp_path_factory):
    out = tmp_path_factory.mktemp("iface") / "fx"
    r = subprocess.run([str(MBFORGE), "generate", "slidercrank", "--kernel", "inverse-dynamics", "--target",
                        "c-fixed", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def test_the_header_names_every_index_and_q_format(fixed_kernel, tmp_path):
    m = Manifest.load(fixed_kernel)
    header = (fixed_kernel / "slidercrank.h").read_text()
    P = "SLIDERCRANK_INVERSE_DYNAMICS"
    assert f"#define {P}_OUT_u_crank_torque 0\n" in header
    defines = dict(re.findall(rf"#define ({P}_\w+) (-?\d+)\n", header))
    for side, groups in (("IN", m.inputs), ("OUT", m.outputs)):
        for g in groups:
            for k, (label, frac) in enumerate(zip(g.labels, g.frac_bits)):
                assert defines[f"{P}_{side}_{label}"] == str(g.offset + k)
                assert defines[f"{P}_{side}_{label}_FRAC"] == str(frac)
    # the defines compile and index the kernel's arrays as the manifest says
    src = tmp_path / "use.c"
    src.write_text(f'#include <stdio.h>\n#include "slidercrank.h"\nint main(void) {{ printf("%d %d %d\\n", '
                   f"{P}_OUT_u_crank_torque, {P}_IN_th1_d, {P}_IN_th1_d_FRAC); return 0; }}\n")
    exe = tmp_path / "use"
    subprocess.run(["gcc", f"-I{fixed_kernel}", str(src), "-o", str(exe)], check=True)
    th1_d = m.flat_names("inputs").index("th1_d (qd[5])")
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.split() == \
        ["0", str(th1_d), str(m.inputs[1].frac_bits[5])]


def test_a_float_header_has_indices_but_no_q_formats(tmp_path):
    out = tmp_path / "f"
    r = subprocess.run([str(MBFORGE), "generate", "slidercrank", "--kernel", "inverse-dynamics", "--target",
                        "c-double", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    header = (out / "slidercrank.h").read_text()
    assert "#define SLIDERCRANK_INVERSE_DYNAMICS_OUT_lambda_ground_x 1\n" in header
    assert "_FRAC" not in header


def test_the_manifest_shows_the_declared_range_and_the_enclosure(fixed_kernel):
    eqs = load("slidercrank").equations()
    m = Manifest.load(fixed_kernel)
    q = m.inputs[0]
    assert q.range == [list(eqs.ranges[s]) for s in eqs.q]  # declared, as docs/model-api.md says
    boxes = np.array(__import__("json").loads((fixed_kernel / m.domain).read_text())["boxes"])
    hull = np.stack([boxes[:, :, 0].min(axis=0), boxes[:, :, 1].max(axis=0)], axis=1)
    assert np.allclose(q.enclosure, hull[:q.size])
    th1 = [s.value.name for s in eqs.q].index("th1")
    assert q.range[th1] != q.enclosure[th1]  # the cover's enclosure is not the declared range


def test_reports_name_outputs_by_label(fixed_kernel):
    m = Manifest.load(fixed_kernel)
    names = m.flat_names("outputs")
    assert names[0] == "u_crank_torque (u[0])" and names[1] == "lambda_ground_x (lambda[0])"
    m.outputs[0].labels = ["u[0]"]  # a label that is the element's place says it once
    assert m.flat_names("outputs")[0] == "u[0]"


def test_plot_titles_name_their_columns():
    panels = _panels(["t", "theta1", "theta2", "theta3", "motor1", "motor2", "x"])
    assert list(panels) == ["theta1 .. theta3", "motor1, motor2", "x"]
    assert panels["theta1 .. theta3"] == [1, 2, 3]
