"""The tape's op table (lower.tapeops) and the rule tables every analysis runs on it:
every rule is for an op of the table, every op lowering can write is in it, the table's
evaluation is the atoms' own, and an op an analysis has no rule for is refused in one
line naming it."""
import numpy as np
import pytest

from mbforge.analysis import aligned, fixedpoint, fixerror, floaterror, ranges
from mbforge.analysis.ranges import analyse_domain
from mbforge.backends.fixed import ops as fixed_ops
from mbforge.ir import Evaluator, ExpressionError, atan2, cos, exp, sin, sqrt, symbol
from mbforge.ir.ops import OPS
from mbforge.lower import lower
from mbforge.lower.tapeops import TAPE_OPS, last_reads

pytestmark = pytest.mark.host

TABLES = {"ranges": ranges.RANGE_RULES, "fixed plan": fixedpoint.PLAN_RULES, "fixed forms": fixerror.FORM_RULES,
          "float32 bounds": floaterror.BOUND_RULES, "float32 forms": floaterror.FORM_RULES,
          "adjoints": aligned.ADJOINT_RULES, "fixed lowering": fixed_ops.LOWER_RULES}


def test_every_rule_is_for_an_op_of_the_table():
    for name, rules in TABLES.items():
        assert set(rules.table) <= set(TAPE_OPS), (name, set(rules.table) - set(TAPE_OPS))
    # the fixed-point tables cover the same ops: what the planner accepts is lowered and bounded
    assert set(fixedpoint.PLAN_RULES.table) == set(fixerror.FORM_RULES.table) == set(fixed_ops.LOWER_RULES.table)
    for rules in (floaterror.FORM_RULES, aligned.ADJOINT_RULES, ranges.RANGE_RULES):
        assert set(rules.table) == set(floaterror.BOUND_RULES.table)


def test_the_table_holds_every_op_lowering_writes_and_its_lowered_ops_exist():
    writable = {n for n, o in OPS.items() if o.arity and not o.valued} | {"sub", "sincos"}
    assert writable == set(TAPE_OPS)
    for o in TAPE_OPS.values():
        assert set(o.hw) <= set(fixed_ops.OPS), o.name
        assert (len(o.results) == 2) == (o.name == "sincos")


def test_the_table_evaluates_a_tape_as_the_atoms_do():
    x, y = symbol("to_x"), symbol("to_y")
    outs = [x - y, -x * y, x / (2 + y), sqrt(1 + x * x), sin(x) + cos(x), atan2(y, x), exp(y)]
    tape = lower(outs, [x, y])
    assert {"sub", "neg", "div", "sqrt", "sincos", "atan2", "exp"} <= {i.op for i in tape.instrs}
    X = np.random.default_rng(1).uniform(0.1, 2.0, (50, 2))
    val = {}
    for ins in tape.instrs:
        args = [val[v] if k == "t" else X[:, v] if k == "in" else np.full(len(X), v) for k, v in ins.args]
        for d, r in zip(ins.dst, TAPE_OPS[ins.op].np(*args)):
            val[d] = r
    got = np.stack([val[v] if k == "t" else X[:, v] for k, v in tape.outputs], 1)
    assert np.array_equal(got, Evaluator(outs, [x, y])(X))


def test_an_op_without_a_rule_is_refused_in_one_line_naming_the_analysis():
    x = symbol("tr_x")
    tape = lower([exp(x) + 1.0], [x])
    with pytest.raises(ExpressionError, match=r"range analysis has no rule for 'exp' \(exp computing exp\(tr_x\)"):
        analyse_domain(tape, [[(0.0, 1.0)]])
    with pytest.raises(ExpressionError, match="aligned rounding error: no rule for 'exp'"):
        aligned.aligned_errors(tape, np.array([[0.5]]))


def test_last_reads():
    x, y = symbol("lr_x"), symbol("lr_y")
    tape = lower([x * y + x, x * y - y], [x, y])
    dead = last_reads(tape)
    reads = {t: max(i for i, ins in enumerate(tape.instrs) if ("t", t) in ins.args or t in ins.dst)
             for ins in tape.instrs for t in ins.dst}
    assert sorted(t for ts in dead for t in ts) == sorted(reads)
    for i, ts in enumerate(dead):
        assert all(reads[t] == i for t in ts)
