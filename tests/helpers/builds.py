"""C built and run on the host, a generated firmware project's flags, `mbforge generate`
in a fresh process."""
import configparser
import os
import subprocess
import sys
from pathlib import Path

from mbforge.backends.render import render_template
from mbforge.firmware.project import EXTRA_SCRIPT

# The sincos as shipped before the range check (mbforge 0.1.0): the reference for the
# bits. Its (int32_t)k is undefined for |x| >= ~3.37e9.
FORMER = r"""
static inline void old_sincosf(float x, float *s, float *c)
{
    const float k = (x * 0.636619772f + 12582912.0f) - 12582912.0f;
    const int32_t q = (int32_t)k;
    float r = x - k * 1.5703125f;
    r = r - k * 4.83870506e-4f;
    r = r + k * 4.37113883e-8f;
    const float z = r * r;
    const float sp = r + r * z * (-1.66666546e-1f + z * (8.33216087e-3f + z * -1.95152959e-4f));
    const float cp = (1.0f - 0.5f * z) + z * z * (4.16666456e-2f + z * (-1.38873163e-3f + z * 2.44331571e-5f));
    switch (q & 3) {
    case 0: *s = sp; *c = cp; break;
    case 1: *s = cp; *c = -sp; break;
    case 2: *s = -sp; *c = -cp; break;
    default: *s = -cp; *c = sp; break;
    }
}
"""
HEAD = "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#include <math.h>\n#include <float.h>\n"
MBFORGE = Path(sys.executable).parent / "mbforge"


def build_and_run(tmp_path, body: str, flags=(), name="t") -> subprocess.CompletedProcess:
    """`body` (C, with main) after mbforge's float32 sin/cos (prefix t) and the former
    sincos (old_sincosf), built with the host gcc and run."""
    src = tmp_path / f"{name}.c"
    src.write_text(HEAD + render_template("c/mathf.c.j2", p="t") + FORMER + body)
    exe = tmp_path / name
    cc = subprocess.run(["gcc", "-O2", "-std=gnu11", "-ffp-contract=off", "-fno-math-errno", *flags,
                         str(src), "-o", str(exe), "-lm"], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)


def extra_script_linkflags(project: Path, pioenv: str = "nucleo_f446re") -> list[str]:
    """Run the generated PlatformIO extra script against a recording environment."""
    appended: dict[str, list] = {}

    class Recorder:
        def __getitem__(self, key):
            assert key == "PIOENV"
            return pioenv

        def Append(self, **kw):
            for k, v in kw.items():
                appended.setdefault(k, []).extend(v)

    code = (project / EXTRA_SCRIPT).read_text()
    exec(compile(code, EXTRA_SCRIPT, "exec"), {"Import": lambda name: None, "env": Recorder()})
    return appended["LINKFLAGS"]


def ini_build_flags(project: Path, env: str) -> list[str]:
    """The build flags of `env` in the generated platformio.ini, the common ones expanded."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(project / "platformio.ini")
    flags = ini[f"env:{env}"]["build_flags"].replace("${env.build_flags}", ini["env"]["build_flags"])
    return flags.split()


def generate_in_fresh_process(model: str, kernel: str, target: str, out: Path, seed: str,
                              extra=()) -> dict[str, bytes]:
    """`mbforge generate` (with the `extra` arguments) in a new process with
    PYTHONHASHSEED=seed: the files it wrote."""
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([str(MBFORGE), "generate", model, "--kernel", kernel, "--target", target, "--out", str(out),
                           *extra],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
