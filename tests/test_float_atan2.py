"""mbforge's float32 atan2 (templates/c/mathf.c.j2) on the host compiler, and c-float32
kernels that use it: the polynomial path within 9.39e-8 of atan on every 8th float of
[0, 1], the whole function within the 4.33e-7 its comment claims (and below floaterror's
ATAN2_ERROR) on arguments of every quadrant and scale, NaN for inf and NaN; a generated
kernel stays within its manifest bound, and gets none where its argument box reaches the
branch cut (x < 0, y = 0), where the angle jumps by 2 pi."""
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mbforge.analysis.floaterror import ATAN2_ERROR
from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator, atan2, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.manifest import Manifest
from mbforge.pipeline import generate

from helpers.builds import build_and_run

pytestmark = [pytest.mark.host, pytest.mark.needs("gcc")]


def test_the_polynomial_path_on_every_8th_float_of_0_1(tmp_path):
    # atan2f(t, 1) takes t itself (1 is the larger, the division exact): the path alone
    body = r"""
int main(void) {
    double worst = 0.0;
    for (uint32_t b = 0; b <= 0x3F800000u; b += 8) {
        float t;
        memcpy(&t, &b, 4);
        double e = fabs((double)t_atan2f(t, 1.0f) - atan((double)t));
        if (e > worst) worst = e;
    }
    printf("%.17g\n", worst);
    return 0;
}
"""
    r = build_and_run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert 5e-8 < float(r.stdout) <= 9.39e-8  # the exhaustive figure (every float) is 9.38904e-8


def test_every_quadrant_and_scale(tmp_path):
    rng = np.random.default_rng(0)
    n = 400_000
    mag = 10.0 ** rng.uniform(-30, 30, (n, 2)) * rng.choice([-1.0, 1.0], (n, 2))
    near = rng.uniform(-1, 1, (n, 2))  # and near the axes and diagonals
    near[: n // 4, 0] *= 1e-6
    near[n // 4: n // 2, 1] *= 1e-6
    near[n // 2: 3 * n // 4, 1] = near[n // 2: 3 * n // 4, 0] * (1 + rng.uniform(-1e-6, 1e-6, n // 4))
    P = np.vstack([mag, near]).astype(np.float32)
    data = tmp_path / "p.bin"
    P.tofile(data)
    body = r"""
int main(void) {
    FILE *f = fopen("DATA", "rb");
    float yx[2];
    double worst = 0.0;
    unsigned long n = 0;
    while (fread(yx, sizeof(float), 2, f) == 2) {
        double e = fabs((double)t_atan2f(yx[0], yx[1]) - atan2((double)yx[0], (double)yx[1]));
        if (e > worst) worst = e;
        n++;
    }
    const float s[][2] = {{0.0f, 0.0f}, {INFINITY, 1.0f}, {1.0f, -INFINITY}, {NAN, 1.0f}, {1.0f, NAN}};
    printf("%lu %.17g %g", n, worst, t_atan2f(s[0][0], s[0][1]));
    for (int i = 1; i < 5; i++) printf(" %d", isnan(t_atan2f(s[i][0], s[i][1])) != 0);
    printf("\n");
    return 0;
}
""".replace("DATA", str(data))
    r = build_and_run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    count, worst, zero, *nans = r.stdout.split()
    assert int(count) == 2 * n and float(worst) <= 4.33e-7 < ATAN2_ERROR and float(zero) == 0.0
    assert nans == ["1", "1", "1", "1"]


X, Y, W = symbol("ta_x"), symbol("ta_y"), symbol("ta_w")


@pytest.mark.parametrize("rx,ry,bounded", [((0.5, 2.0), (-1.0, 1.0), True), ((-2.0, -0.5), (0.25, 1.0), True),
                                           ((-1.0, 1.0), (0.3, 2.0), True), ((-2.0, -0.5), (-1.0, 1.0), False)])
def test_a_kernel_with_an_angle_output_stays_within_its_bound(rx, ry, bounded):
    k = Kernel("ta", "angle", [InPort("v", [X, Y, W], [rx, ry, (0.5, 1.5)])],
               [OutPort.vector("a", [atan2(Y, X), atan2(Y * W, X + 0.1) * W + X])])
    with tempfile.TemporaryDirectory() as d:
        generate(k, "c-float32").write(d)
        bound = Manifest.load(Path(d)).outputs[0].error_bound
        if not bounded:  # the box reaches the branch cut: no finite bound
            assert bound == [None, None]
            return
        rng = np.random.default_rng(1)
        P = np.column_stack([rng.uniform(lo, hi, 100_000) for lo, hi in (rx, ry, (0.5, 1.5))])
        got, status = load_kernel(Path(d))(P.astype(np.float32))
    assert (status == 0).all()
    err = np.abs(np.asarray(got, dtype=np.float64) - Evaluator(k.output_atoms, k.input_symbols)(P)).max(0)
    assert (err <= np.array(bound)).all() and (err > 0).all(), (err, bound)
    assert (np.array(bound) < 20 * err).all(), (err, bound)  # and not loose by orders of magnitude


@pytest.mark.firmware
@pytest.mark.needs("arm-none-eabi-gcc", "qemu-system-arm")
def test_the_m4f_computes_the_same_bits(tmp_path):
    """The angle kernel built into the emulated M4F's firmware: 1,000 vectors of its domain
    within bound against double and bit for bit as the host's build computes them."""
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil import harness

    k = Kernel("angles", "angle", [InPort("v", [X, Y, W], [(-2.0, 1.0), (0.3, 2.0), (0.5, 1.5)])],
               [OutPort.vector("a", [atan2(Y, X), atan2(Y * W, X + 0.1) * W + X])])
    generate(k, "c-float32").write(tmp_path / "k32")
    generate(k, "c-double").write(tmp_path / "k64")
    elf = build(generate_project(tmp_path / "k32", tmp_path / "proj"), "emulated_f405")
    with Emulator(elf) as emu:
        rep = harness.run(emu.url, tmp_path / "k32", tmp_path / "k64", vectors=1000, host_model=True)
    assert rep.passed, rep.table()
    assert rep.host_model == {"vectors_mismatched": 0, "elements_mismatched": 0}
