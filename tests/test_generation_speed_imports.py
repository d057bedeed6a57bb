"""`mbforge generate` imports only what it uses: SymPy (about a second) only when a sympy
expression is converted, never for the command line or a shipped example's kernel.

Each check runs in a fresh interpreter (a subprocess), since this test session has
long imported everything."""
from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sympy",)


def _modules_after(code: str) -> set[str]:
    """The top-level packages in sys.modules after running `code` in a new interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_command_line_does_not_import_sympy():
    mods = _modules_after("import mbforge.cli\nmbforge.cli.build_parser()\nimport mbforge.ir, mbforge.pipeline")
    assert "mbforge" in mods
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_generating_a_shipped_example_does_not_import_sympy():
    mods = _modules_after(
        "from mbforge.examples import load_model\n"
        "from mbforge.kernels.builders import build_kernel\n"
        "from mbforge.pipeline import generate\n"
        "k = build_kernel(load_model('fourbar').equations(), 'equations')\n"
        "assert k.motion, 'the verification vectors are computed'\n"
        "generate(k, 'c-double')\n")
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_sympy_expressions_still_convert_on_demand():
    # the bridge imports sympy on its first use: a user's sympy expression becomes atoms
    out = subprocess.run([sys.executable, "-c", (
        "import sys, mbforge.ir as ir\n"
        "assert 'sympy' not in sys.modules\n"
        "import sympy as sp\n"
        "x = sp.Symbol('x')\n"
        "a = ir.as_atom(sp.sin(x) ** 2 + 3 * x)\n"
        "print(ir.evaluate(a, {ir.symbol('x'): 0.5}), ir.to_sympy(a).subs(sp.Symbol('x', real=True), 0.5).evalf())\n")],
        capture_output=True, text=True, check=True, timeout=120)
    got, back = (float(v) for v in out.stdout.split())
    want = 0.479425538604203 ** 2 + 1.5
    assert abs(got - want) < 1e-12 and abs(back - want) < 1e-12


def test_the_helper_sees_a_real_import():
    # the helper itself can fail: a module the code imports shows up
    assert "sympy" in _modules_after("import mbforge.ir\nimport sympy")
