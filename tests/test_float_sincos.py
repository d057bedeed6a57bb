"""The float32 sincos of c-float32 kernels (templates/c/mathf.c.j2) on the host compiler:
defined for every argument, flagged beyond its accuracy range, and bit-identical to the
former version wherever that one was defined (shipped kernels' outputs do not change)."""
import pytest

from helpers.builds import build_and_run

pytestmark = [pytest.mark.host, pytest.mark.needs("gcc")]


UBSAN = ["-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"]
EXTREME = ["6432.99f", "6433.0f", "-6433.0f", "6433.0005f", "-6433.0005f", "1e4f", "3.3e9f", "3.4e9f", "-3.4e9f",
           "1e10f", "-1e30f", "FLT_MAX", "-FLT_MAX", "INFINITY", "-INFINITY", "NAN", "-NAN",
           "0.0f", "-0.0f", "1e-45f", "FLT_MIN", "1.5707964f", "-3.1415927f"]


def test_extreme_arguments_are_defined_and_flagged(tmp_path):
    """Under UBSan (float-cast-overflow included) nothing is undefined; inside |x| <= 6433
    the results are finite and accurate, outside (inf and NaN too) both are NaN."""
    body = "int main(void) {\n    const float xs[] = {" + ", ".join(EXTREME) + "};\n" + r"""
    for (unsigned i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float s, c;
        t_sincosf(xs[i], &s, &c);
        printf("%a %d %d %.9g %.9g\n", xs[i], isnan(s) != 0, isnan(c) != 0,
               isnan(s) ? 0.0 : fabs(s - sin((double)xs[i])), isnan(c) ? 0.0 : fabs(c - cos((double)xs[i])));
    }
    return 0;
}
"""
    r = build_and_run(tmp_path, body, UBSAN)
    assert r.returncode == 0 and "runtime error" not in r.stderr, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert len(rows) == len(EXTREME)
    for lit, (x, nan_s, nan_c, es, ec) in zip(EXTREME, rows):
        v = float.fromhex(x) if "nan" not in x and "inf" not in x else float(x)
        inside = abs(v) <= 6433.0
        assert (nan_s, nan_c) == (("0", "0") if inside else ("1", "1")), lit
        if inside:
            assert float(es) < 1e-7 and float(ec) < 1e-7, lit


def test_the_former_version_was_undefined_there(tmp_path):
    """The check above can fail: the former cast is caught by the same sanitizer."""
    body = "int main(void) { volatile float x = 3.4e9f; float s, c; old_sincosf(x, &s, &c);" \
           " printf(\"%g\\n\", s); return 0; }\n"
    r = build_and_run(tmp_path, body, UBSAN, name="old")
    assert r.returncode != 0 and "runtime error" in r.stderr


def test_bits_equal_the_former_version_inside_the_range(tmp_path):
    """Every 5th float with |x| <= 6433 (about 470 million arguments): sin and cos bit for
    bit as before, so no shipped c-float32 kernel's output changes."""
    body = r"""
int main(void) {
    const uint32_t top = 0x45C90800u;  /* 6433.0f */
    unsigned long long n = 0, bad = 0;
    for (uint32_t b = 0; b <= top; b += 5) {
        for (int sign = 0; sign < 2; sign++) {
            uint32_t u = b | (sign ? 0x80000000u : 0u);
            float x, s0, c0, s1, c1;
            memcpy(&x, &u, 4);
            old_sincosf(x, &s0, &c0);
            t_sincosf(x, &s1, &c1);
            n++;
            if (memcmp(&s0, &s1, 4) || memcmp(&c0, &c1, 4))
                bad++;
        }
    }
    printf("%llu %llu\n", n, bad);
    return 0;
}
"""
    r = build_and_run(tmp_path, body)
    assert r.returncode == 0, r.stderr
    n, bad = map(int, r.stdout.split())
    assert n > 400_000_000 and bad == 0


def test_a_generated_kernel_refuses_an_angle_beyond_its_envelope(tmp_path):
    """fourbar kinematics in c-float32 and c-double on the host: an input of 1e4 (an angle
    far beyond what the sincos reduces exactly) is refused before anything is computed,
    status 2 and outputs untouched, in both; inside the domain all are finite, status 0."""
    import numpy as np

    from mbforge.cli import main as cli
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import draw, to_raw
    k, d = tmp_path / "f", tmp_path / "d"
    assert cli(["generate", "fourbar", "--kernel", "kinematics", "--target", "c-float32", "--out", str(k)]) == 0
    assert cli(["generate", "fourbar", "--kernel", "kinematics", "--target", "c-double", "--out", str(d)]) == 0
    kern, ref = hostlib.load_kernel(k), hostlib.load_kernel(d)
    X = to_raw(kern.manifest, draw(kern.manifest, k, 4, seed=0))
    Y, status = kern(X)
    assert np.isfinite(Y).all() and (status == 0).all()
    for j in range(X.shape[1]):
        Xb = X.copy()
        Xb[:, j] = 1e4
        for kk, x in ((kern, Xb), (ref, Xb.astype(np.float64))):
            Yb, sb = kk(x)
            assert (sb == 2).all() and (Yb == 0).all()
