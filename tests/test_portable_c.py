"""The generated C is portable C: built for 64-bit ARM (aarch64-linux-gnu-gcc, run under
qemu-aarch64) as well as for the host (x86-64 gcc), one driver, the same consistent states,
the two runs agree: bit for bit for c-float32 (mbforge's own sin/cos) and c-fixed
(integers); c-double within a few ulps (the platforms' libm sin/cos may round apart).

Why: c-float32 keeps constants in registers with an empty asm whose register class is the
architecture's; AArch64 defines __ARM_FP as 32-bit ARM does, but has no "t" class (a
kernel that compiled for the M4F and the host failed there), and no chained
multiply-accumulate either (its FMADD rounds once)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify import hostlib, vectors
from mbforge.kernels.builders import build_kernel
from mbforge.reals import REALS
from mbforge.pipeline import generate

CROSS, QEMU = "aarch64-linux-gnu-gcc", "qemu-aarch64"
FLAGS = ["-O2", "-ffp-contract=off", "-fno-math-errno"]
pytestmark = [pytest.mark.slow, pytest.mark.needs(CROSS, QEMU)]  # QEMU user mode

# reads n input vectors from stdin, writes each one's outputs and status to stdout
DRIVER = """
#include <stdio.h>
#include <stdint.h>
#include "{header}"
int main(void) {{
    static {real} in[{n_in}], out[{n_out}];
    while (fread(in, sizeof in, 1, stdin) == 1) {{
        int32_t status = {function}(in, out);
        fwrite(out, sizeof out, 1, stdout);
        fwrite(&status, sizeof status, 1, stdout);
    }}
    return 0;
}}
"""


def _run(cc: list[str], kdir, m, X: np.ndarray, exe) -> tuple[np.ndarray, np.ndarray]:
    """(outputs, statuses) of the kernel built by the compiler command `cc` and run (under
    qemu-aarch64 for the cross compiler)."""
    drv = kdir / "driver.c"
    drv.write_text(DRIVER.format(header=m.headers[0], real=REALS[m.real].c_type, n_in=m.n_in, n_out=m.n_out,
                                 function=m.function))
    subprocess.run([*cc, *FLAGS, "-I", str(kdir), str(drv), *(str(kdir / s) for s in m.sources), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    runner = [QEMU, "-L", "/usr/aarch64-linux-gnu", str(exe)] if cc[0] == CROSS else [str(exe)]
    raw = subprocess.run(runner, input=X.tobytes(), capture_output=True, check=True).stdout
    width = X.dtype.itemsize * m.n_out + 4
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(len(X), width)
    out = rows[:, :width - 4].copy().view(X.dtype)
    status = rows[:, width - 4:].copy().view(np.int32)[:, 0]
    return out, status


# every target on the four-bar; the Stewart's large kernel (spills, windows, constants in
# registers, multiply-accumulates) in the float targets (c-fixed of it takes 30 s to generate)
@pytest.mark.parametrize("example,kname,target", [
    *(("fourbar", "kinematics", t) for t in ("c-float32", "c-fixed", "c-double")),
    ("stewart", "equations", "c-float32"), ("stewart", "equations", "c-double")])
def test_kernel_runs_alike_on_aarch64_and_the_host(tmp_path, example, kname, target):
    k = build_kernel(load(example).equations(), kname)
    kdir = tmp_path / "k"
    generate(k, target).write(kdir)
    m = hostlib.load_manifest(kdir)
    X = np.ascontiguousarray(vectors.draw_raw(m, kdir, 200, seed=5, motion=False))
    host, s_host = _run(["gcc"], kdir, m, X, tmp_path / "host")
    arm, s_arm = _run([CROSS], kdir, m, X, tmp_path / "arm64")
    assert (s_host == 0).all() and (s_arm == 0).all()
    if target == "c-double":
        scale = np.maximum(np.abs(host).max(axis=0), 1.0)
        assert np.max(np.abs(arm - host) / scale) < 1e-14
    else:
        assert np.array_equal(arm.view(np.uint8), host.view(np.uint8))
