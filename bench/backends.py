"""The three engines under test, behind one small interface.

For a generic model (bench/generic.py) each backend builds the joint function
(Phi, Phi_q, Phi_t, gamma, M, Q) with its own differentiation and common-subexpression
elimination, generates C, and counts the operations in what it generated: + - * / and
calls, after dead-code elimination. Timings cover the whole path from the model to C text.
"""
from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path


class Result:
    def __init__(self, name, seconds, ops, atoms, c_text, n_out, extra=None):
        self.name, self.seconds, self.ops, self.atoms, self.c_text, self.n_out = name, seconds, ops, atoms, c_text, n_out
        self.extra = extra or {}


# ---- mbforge ----------------------------------------------------------------------------------
class MbforgeBackend:
    name = "mbforge"

    def __init__(self):
        import mbforge.ir as ir

        self.ir = ir
        self.sin, self.cos, self.sqrt = ir.sin, ir.cos, ir.sqrt

    def sym(self, name, kind):
        return self.ir.symbol("bm_" + name, kind)

    def const(self, v):
        return self.ir.const(v)

    def zero(self, e):
        return isinstance(e, self.ir.Atom) and e is self.ir.ZERO or (not isinstance(e, self.ir.Atom) and e == 0)

    def joint(self, builder, target="c-double", schedule="pressure"):
        ir = self.ir
        from mbforge.kernels import InPort, Kernel, OutPort
        from mbforge.pipeline import generate
        from mbforge.backends.render import render_template  # noqa: F401  (import cost, not timed)
        import jinja2.compiler, jinja2.lexer, jinja2.parser  # noqa: E401,F401  (jinja imports these lazily)

        t0 = time.perf_counter()
        eqs = builder(self)
        phi = [ir.as_atom(x) for x in eqs.phi]
        J = ir.jacobian(phi, eqs.q)
        phi_t = ir.time_derivative(phi, {eqs.t: ir.ONE})
        seeds = {**dict(zip(eqs.q, eqs.qd)), eqs.t: ir.ONE}
        phidot = ir.time_derivative(phi, seeds)
        gamma = [ir.neg(x) for x in ir.time_derivative(phidot, seeds)]
        M = ir.Sparse((len(eqs.q), len(eqs.q)), {k: ir.as_atom(v) for k, v in eqs.M.items()})
        Q = [ir.as_atom(x) for x in eqs.Q]
        ranges = [(-1.0, 1.0)]
        k = Kernel(eqs.name, "joint", [InPort("q", eqs.q, ranges * len(eqs.q)),
                                        InPort("qd", eqs.qd, ranges * len(eqs.q)),
                                        InPort("t", [eqs.t], ranges)],
                   [OutPort.vector("Phi", phi), OutPort.sparse("Phi_q", J), OutPort.vector("Phi_t", phi_t),
                    OutPort.vector("gamma", gamma), OutPort.sparse("M", M), OutPort.vector("Q", Q)])
        plan = generate(k, target, prefix="mbf_" + eqs.name, options={"schedule": schedule})
        dt = time.perf_counter() - t0
        m = plan.manifest
        atoms = len(ir.topo(k.output_atoms))
        return Result(self.name, dt, m.ops["total"], atoms, plan.files[m.sources[0]], m.n_out,
                      {"plan": plan, "kernel": k})

    def chain_jacobian(self, n):
        ir = self.ir
        t0 = time.perf_counter()
        th, p = generic_chain(self, n)
        J = ir.jacobian(p, th)
        from mbforge.lower import op_counts

        ops = op_counts(J.values())["total"]
        return time.perf_counter() - t0, ops


# ---- CasADi SX ---------------------------------------------------------------------------------
class CasadiBackend:
    name = "casadi"

    def __init__(self):
        import casadi as ca

        self.ca = ca
        self.sin, self.cos, self.sqrt = ca.sin, ca.cos, ca.sqrt

    def sym(self, name, kind):
        return self.ca.SX.sym(name)

    def const(self, v):
        return self.ca.SX(v)

    def zero(self, e):
        return self.ca.SX(e).is_zero()

    def joint(self, builder, real="double"):
        ca = self.ca
        t0 = time.perf_counter()
        eqs = builder(self)
        q, qd, t = ca.vertcat(*eqs.q), ca.vertcat(*eqs.qd), eqs.t
        phi = ca.vertcat(*eqs.phi)
        J = ca.jacobian(phi, q)
        phi_t = ca.jacobian(phi, t)
        phidot = ca.jtimes(phi, q, qd) + phi_t
        gamma = -(ca.jtimes(phidot, q, qd) + ca.jacobian(phidot, t))
        n = len(eqs.q)
        keys = sorted(eqs.M)
        Msp = ca.Sparsity.triplet(n, n, [i for i, _ in keys], [j for _, j in keys])
        M = ca.SX(Msp, ca.vertcat(*[eqs.M[k] for k in sorted(keys, key=lambda ij: (ij[1], ij[0]))]))
        Q = ca.vertcat(*eqs.Q)
        f = ca.Function("cas_" + eqs.name, [q, qd, t], [phi, J, phi_t, gamma, M, Q], {"cse": True})
        with tempfile.TemporaryDirectory() as d:
            opts = {"casadi_real": real, "with_header": False}
            cg = ca.CodeGenerator("cas_" + eqs.name + ".c", opts)
            cg.add(f)
            path = Path(d) / ("cas_" + eqs.name + ".c")
            cg.generate(d + "/")
            c_text = path.read_text()
        dt = time.perf_counter() - t0
        n_out = sum(f.nnz_out(i) for i in range(f.n_out()))
        return Result(self.name, dt, casadi_ops(f), f.n_nodes(), c_text, n_out, {"function": f})

    def chain_jacobian(self, n):
        ca = self.ca
        t0 = time.perf_counter()
        th, p = generic_chain(self, n)
        J = ca.jacobian(ca.vertcat(*p), ca.vertcat(*th))
        f = ca.Function("chain", [ca.vertcat(*th)], [J], {"cse": True})
        return time.perf_counter() - t0, casadi_ops(f)


def casadi_ops(f) -> int:
    import casadi as ca

    skip = {ca.OP_INPUT, ca.OP_OUTPUT, ca.OP_CONST, ca.OP_ASSIGN, ca.OP_PARAMETER}
    return sum(1 for k in range(f.n_instructions()) if f.instruction_id(k) not in skip)


# ---- SymPy ----------------------------------------------------------------------------------------
class SympyBackend:
    name = "sympy"

    def __init__(self):
        import sympy as sp

        self.sp = sp
        self.sin, self.cos, self.sqrt = sp.sin, sp.cos, sp.sqrt

    def sym(self, name, kind):
        return self.sp.Symbol(name, real=True)

    def const(self, v):
        return self.sp.Float(v) if not float(v).is_integer() else self.sp.Integer(int(v))

    def zero(self, e):
        return e == 0

    def joint(self, builder):
        sp = self.sp
        t0 = time.perf_counter()
        eqs = builder(self)
        q, qd, t = sp.Matrix(eqs.q), sp.Matrix(eqs.qd), eqs.t
        phi = sp.Matrix(eqs.phi)
        J = phi.jacobian(q)
        phi_t = phi.diff(t)
        phidot = J * qd + phi_t
        gamma = -(phidot.jacobian(q) * qd + phidot.diff(t))
        outs = list(phi) + [x for x in J if x != 0] + list(phi_t) + list(gamma)
        outs += [eqs.M[k] for k in sorted(eqs.M)] + list(eqs.Q)
        repl, reduced = sp.cse(outs, symbols=sp.numbered_symbols("cse"))
        lines = [f"double {s} = {sp.ccode(e)};" for s, e in repl]
        lines += [f"out[{k}] = {sp.ccode(e)};" for k, e in enumerate(reduced)]
        c_text = "\n".join(lines)
        dt = time.perf_counter() - t0
        ops = sum(sympy_ops(e) for _, e in repl) + sum(sympy_ops(e) for e in reduced)
        return Result(self.name, dt, ops, len(repl), c_text, len(outs),
                      {"inputs": [str(x) for x in list(eqs.q) + list(eqs.qd) + [eqs.t]]})

    def chain_jacobian(self, n):
        sp = self.sp
        t0 = time.perf_counter()
        th, p = generic_chain(self, n)
        J = sp.Matrix(p).jacobian(sp.Matrix(th))
        repl, reduced = sp.cse(list(J), symbols=sp.numbered_symbols("cse"))
        ops = sum(sympy_ops(e) for _, e in repl) + sum(sympy_ops(e) for e in reduced)
        return time.perf_counter() - t0, ops


def sympy_ops(e) -> int:
    """Binary operations and calls as C would print the expression: an n-ary sum or
    product is n-1 operations, an integer power p is p-1 multiplications, a leading -1
    factor is a negation folded into the surrounding sum when there is one."""
    import sympy as sp

    n = 0
    for node in sp.preorder_traversal(e):
        if node.is_Add:
            n += len(node.args) - 1
        elif node.is_Mul:
            args = node.args
            if args[0] == -1:
                args = args[1:]
                n += 0 if len(args) else 1
            n += len(args) - 1
        elif node.is_Pow:
            ex = node.args[1]
            if ex.is_Integer and ex > 0:
                n += int(ex) - 1
            elif ex.is_Integer and ex < 0:
                n += int(-ex)  # 1/x**k: k-1 multiplications and a division
            elif ex == sp.Rational(1, 2) or ex == -sp.Rational(1, 2):
                n += 1 if ex > 0 else 2
            else:
                n += 1
        elif node.is_Function:
            n += 1
    return n


def generic_chain(B, n):
    from .generic import chain_tip

    return chain_tip(B, n)


class MbforgeFastBackend(MbforgeBackend):
    """mbforge with the depth-first schedule (no register-pressure scheduling)."""

    name = "mbforge-fast"

    def joint(self, builder, target="c-double", schedule="fast"):
        return super().joint(builder, target, schedule)


BACKENDS = {"mbforge": MbforgeBackend, "mbforge-fast": MbforgeFastBackend, "casadi": CasadiBackend,
            "sympy": SympyBackend}
_ = math
