"""Small kernels shared by the HDL tests (not a test module)."""
from mbforge.examples import load
from mbforge.ir import const, cos, sin, sqrt, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel


def functions_kernel() -> Kernel:
    """Every hardware operator: sin/cos (one and both of an argument), sqrt, division by a
    value and of a constant, an input and a constant passed through."""
    x, y = symbol("hk_x"), symbol("hk_y")
    outs = [sin(x), cos(0.25 * x + 0.5), sqrt(x * x + y * y + 0.25), x / (y * y + 0.5),
            sin(x) * cos(y) / (2 + sin(y)), 3 / (y * y + 1), sqrt(y * y * y + 30.0), x, const(2.5)]
    return Kernel("hk", "functions", [InPort("v", [x, y], [(-200.0, 200.0), (-3.0, 3.0)])],
                  [OutPort.vector("y", outs)])


def tiny_kernel() -> Kernel:
    a, b, c = symbol("tk_a"), symbol("tk_b"), symbol("tk_c")
    return Kernel("tk", "tiny", [InPort("v", [a, b, c], [(-2.0, 2.0)] * 3)],
                  [OutPort.vector("y", [a * b + c, a - 0.5 * c])])


def fourbar_equations() -> Kernel:
    return build_kernel(load("fourbar").equations(), "equations")


def fourbar_kinematics() -> Kernel:
    return build_kernel(load("fourbar").equations(), "kinematics")


def delay_kernel() -> Kernel:
    """An input read again after a division (19 cycles): a delay line long enough for a
    memory (delay_lines=memory)."""
    x, y = symbol("dk_x"), symbol("dk_y")
    return Kernel("dk", "delay", [InPort("v", [x, y], [(-4.0, 4.0), (-3.0, 3.0)])],
                  [OutPort.vector("y", [x / (y * y + 0.5) + x])])


def constants_kernel() -> Kernel:
    """Products by literals of one signed digit (0.5, 1/8) and of two (0.75, -3, 6.5 has three):
    shifts, shift-adds and a multiplier in the RTL (rtl.lower.shift_constants)."""
    a, b, c = symbol("ck_a"), symbol("ck_b"), symbol("ck_c")
    return Kernel("ck", "constants", [InPort("v", [a, b, c], [(-2.0, 2.0), (-3.0, 3.0), (-1.0, 1.0)])],
                  [OutPort.vector("y", [0.75 * a + b, -3 * (b * c), 0.5 * a - c / 8, 6.5 * b, a * 1.5 - 0.25 * b])])
