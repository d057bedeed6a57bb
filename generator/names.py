"""What a name that reaches generated code may be: one rule, checked where the name enters.

Names of a model (coordinates, parameters, equations, bodies, joints, forces, actuators,
outputs, operating quantities, relative bases and points) are printed into the headers'
comments, the output labels, the kernels' descriptions, Verilog `//` comments and the
reports; the prefix and a manifest's `function` are C symbols and part of file names. A
name that could end a comment or a string (`*/`, a newline, a quote, a backslash) would
put its rest into the compiled code, so every one of them is an identifier: an ASCII
letter, then letters, digits and `_` (a C symbol also not a C keyword). The model layer
refuses any other name where it is declared (model.errors.check_name), the pipeline the
prefix (pipeline.check_prefix), the manifest a crafted `function`, `prefix` or file name
(manifest.Manifest.check) before the firmware generator or the host library uses it.
"""
from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a model's names
C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a C symbol (with C_KEYWORDS left out)
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")  # a file a manifest names, in its own folder

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Bool _Complex _Imaginary""".split())


def is_name(name) -> bool:
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def is_c_symbol(name) -> bool:
    return isinstance(name, str) and C_IDENT.fullmatch(name) is not None and name not in C_KEYWORDS


def is_file_name(name) -> bool:
    return isinstance(name, str) and FILE_NAME.fullmatch(name) is not None and ".." not in name
