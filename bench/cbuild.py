"""Each engine's generated C behind one ABI, for timing on the host and on the device.

    int bench_kernel(const real *in, real *out)   in = [q, qd, t], out = the outputs

mbforge's kernels have this ABI already (a #define renames them). CasADi's generated
function takes arrays of argument and result pointers: a small adapter points them into
in[] and out[]. SymPy's cse output becomes a function body reading its symbols from in[].
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class CKernel:
    engine: str
    source: str  # complete C translation unit defining bench_kernel
    n_in: int
    n_out: int


def mbforge_kernel(plan, real: str = "double") -> CKernel:
    """The generated kernel of `plan` (pipeline.Plan) behind bench_kernel(in, out), in the
    kernel's real type (double on the host, float for the device benches)."""
    m = plan.manifest
    src = plan.files[m.sources[0]]
    header = plan.files[m.headers[0]]
    # one translation unit: the header inlined, the function renamed
    src = src.replace(f'#include "{m.headers[0]}"', header)
    src += f"\nint bench_kernel(const {real} *in, {real} *out) {{ return {m.function}(in, out); }}\n"
    return CKernel("mbforge", src, m.n_in, m.n_out)


def casadi_kernel(res, real: str = "double") -> CKernel:
    f = res.extra["function"]
    name = f.name()
    n_in = sum(f.nnz_in(i) for i in range(f.n_in()))
    offs_in, o = [], 0
    for i in range(f.n_in()):
        offs_in.append(o)
        o += f.nnz_in(i)
    offs_out, o = [], 0
    for i in range(f.n_out()):
        offs_out.append(o)
        o += f.nnz_out(i)
    src = res.c_text
    if real == "float":
        src = "#define casadi_real float\n" + src
    args = ", ".join(f"in + {k}" for k in offs_in)
    outs = ", ".join(f"out + {k}" for k in offs_out)
    src += (f"\nint bench_kernel(const casadi_real *in, casadi_real *out) {{\n"
            f"  const casadi_real *arg[{f.sz_arg()}] = {{{args}}};\n"
            f"  casadi_real *res[{f.sz_res()}] = {{{outs}}};\n"
            f"  casadi_real w[{max(f.sz_w(), 1)}];\n"
            f"  return {name}(arg, res, 0, w, 0);\n}}\n")
    return CKernel("casadi", src, n_in, o)


def sympy_kernel(res, input_names: list[str]) -> CKernel:
    """res.c_text holds `double xN = ...;` and `out[k] = ...;` lines over symbol names."""
    body = res.c_text
    decl = "\n".join(f"  const double {n} = in[{k}];" for k, n in enumerate(input_names))
    body = "\n".join("  " + line for line in body.splitlines())
    src = ("#include <math.h>\n"
           f"int bench_kernel(const double *in, double *out) {{\n{decl}\n{body}\n  return 0;\n}}\n")
    n_out = len(re.findall(r"^\s*out\[", body, re.M))
    return CKernel("sympy", src, len(input_names), n_out)


TIMING_C = r"""
#include <stdint.h>
#include <time.h>
int bench_kernel(const REAL *in, REAL *out);
/* ns per call over `reps` passes through `n` input vectors; -1 if a call returned a
   nonzero status (the figure would time an early return) */
double bench_ns(const REAL *X, REAL *Y, int64_t n, int64_t n_in, int64_t n_out, int64_t reps)
{
    struct timespec a, b;
    int bad = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int64_t r = 0; r < reps; r++)
        for (int64_t i = 0; i < n; i++)
            bad |= bench_kernel(X + i * n_in, Y + i * n_out);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return bad ? -1.0 : ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)(reps * n);
}
"""

CALLGRIND_MAIN = r"""
#include <stdint.h>
#include <stdlib.h>
int bench_kernel(const REAL *in, REAL *out);
static REAL X[NX][NIN] = XS;
static REAL Y[NOUT + 1];
/* exit 3 if a call returned a nonzero status (the count would be an early return's) */
int main(int argc, char **argv)
{
    long calls = atol(argv[1]);
    int bad = 0;
    for (long c = 0; c < calls; c++) {
        bad |= bench_kernel(X[c % NX], Y);
        __asm__ volatile ("" ::: "memory");
    }
    return bad ? 3 : 0;
}
"""
