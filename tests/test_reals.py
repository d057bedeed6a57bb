"""One record per real kind (mbforge.reals): what the manifest, the backends, the firmware
generator and budget read of a kernel's element type."""
import re

import numpy as np
import pytest

from mbforge.backends import backend_names, get_backend
from mbforge.manifest import REAL_KINDS
from mbforge.reals import REALS, soft_float

from helpers import ROOT
from helpers.packaging import package_folders


@pytest.mark.parametrize("kind, fpu, soft", [
    ("int32", None, False), ("int32", "sp", False),
    ("float", None, True), ("float", "sp", False), ("float", "dp", False),
    ("double", None, True), ("double", "sp", True), ("double", "dp", False)])
def test_a_core_computes_a_real_kind_in_hardware_when_its_fpu_covers_it(kind, fpu, soft):
    assert soft_float(REALS[kind], fpu) is soft


def test_every_backend_and_manifest_reads_the_record():
    assert REAL_KINDS == tuple(REALS)
    for n in backend_names():
        assert get_backend(n).real is REALS[get_backend(n).real.name]
    for r in REALS.values():
        assert np.dtype(r.dtype).itemsize == r.size and (np.dtype(r.dtype).kind == "i") == r.fixed


def test_the_device_protocol_carries_each_kind_by_its_record():
    # HELLO names the kind by the record's code, and the host reads it back to the same kind
    from mbforge.hil import protocol as P

    for n, r in REALS.items():
        h = P.Hello(P.PROTOCOL_VERSION, n, 3, 2, "SysTick", 1000, 256, 512, "0" * 64, "fw")
        raw = h.pack()
        assert raw[1] == r.code and P.Hello.unpack(raw).real == n


# a comparison of a kind's name with a literal ("real == 'float'", "'int32' != m.real"): a fact
# that belongs in the record
_NAME_TEST = re.compile(r"""\breal\w*\s*[!=]=\s*["'](\w+)["']|["'](\w+)["']\s*[!=]=\s*[\w.]*\breal\b""")


def test_no_module_of_the_package_tells_kinds_apart_by_name():
    found = []
    for folder in package_folders().values():
        for path in sorted(folder.glob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = _NAME_TEST.search(line)
                if m and (m.group(1) or m.group(2)) in REALS:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_name_check_finds_a_comparison():
    assert _NAME_TEST.search('    if m.real == "int32":').group(1) == "int32"
    assert _NAME_TEST.search("elif 'float' != dialect.real:").group(2) == "float"
    assert not _NAME_TEST.search("if m.real_kind.fixed:")


def test_the_record_gives_what_the_stages_print_and_judge():
    from mbforge.backends.c import DIALECTS
    from mbforge.hil.report import _worst_table

    for name, d in DIALECTS.items():  # each C dialect names its type and literals by its record
        assert d.literal(0.5).endswith(d.real.c_suffix) and get_backend(name).real is d.real
    assert {r.judged for r in REALS.values()} <= {"relative", "relative_or_bound", "error_bound"}
    worst = {"per_vector": {"worst": [{"vector": 0, "kind": "random", "element": "y", "device": 1 / 3,
                                       "reference": 0.0, "abs_error": 0.1, "rel_error": 0.1}]}}
    for r in REALS.values():  # a report prints the device's values to its kind's digits
        html = _worst_table({**worst, "device": {"real": r.name}})
        assert f"{1 / 3:.{r.digits}g}" in html, r.name
