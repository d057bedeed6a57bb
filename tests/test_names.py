"""Names cannot put code into what is generated (issue 31, item 10): every name a model
declares is refused where it is declared unless it is an identifier, naming the name and
what holds it; `mbforge generate` of such a model ends in one line and writes nothing;
a manifest whose `function`, `prefix`, digest or file names could inject into the host
library's C, its path or the firmware is refused by `hil`, `firmware` and the host
library in one line."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.manifest import Manifest, ManifestError
from mbforge.model import Model, ModelError
from mbforge.model.natural import point, unit_vector

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "toy"
TOY_DOUBLE = ROOT / "tests" / "fixtures" / "toy_double"
INJECTED = "AB */ int injected_global = 1; /*"


def mbforge(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def one_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _two_bodies():
    m = Model("names")
    x = m.coordinate("x", guess=0.5, range=(-2, 2))
    g = m.ground(dim=2)
    b = m.body2d("b", x, 0.0, 0.0, mass=1.0)
    return m, x, g, b


# each declaration of a name, given one that would end a C comment, and what it is called
DECLARE = {
    "coordinate": lambda m, x, g, b, n: m.coordinate(n),
    "parameter": lambda m, x, g, b, n: m.parameter(n, 1.0),
    "constraint": lambda m, x, g, b, n: m.constraint(x - 0.5, n),
    "driving constraint": lambda m, x, g, b, n: m.drive(x - m.t, n),
    "velocity constraint": lambda m, x, g, b, n: m.velocity_constraint(m.qd[0], n),
    "body": lambda m, x, g, b, n: m.body2d(n, x, 0.0, 0.0),
    "joint": lambda m, x, g, b, n: m.revolute2d(g, (0, 0), b, (0, 0), n),
    "force or actuator": lambda m, x, g, b, n: m.actuator(n, x),
    "output": lambda m, x, g, b, n: m.output(n, x),
    "operating quantity": lambda m, x, g, b, n: m.operate(n, range=(0, 1), equation=lambda th: x - th),
    "point": lambda m, x, g, b, n: point(m, n, (0.0, 0.0)),
    "unit vector": lambda m, x, g, b, n: unit_vector(m, n, (1.0, 0.0, 0.0)),
    "relative base or point": lambda m, x, g, b, n: m.relative().base(n, m.relative().world, (0, 0, 1), x),
}


@pytest.mark.parametrize("what", DECLARE)
@pytest.mark.parametrize("name", [INJECTED, "a\nb", 'a"b', "a\\b", "a/b", "a*b", "a b", "a\x00", "", "1a"])
def test_a_name_that_is_no_identifier_is_refused_where_it_is_declared(what, name):
    m, x, g, b = _two_bodies()
    with pytest.raises(ModelError) as e:
        DECLARE[what](m, x, g, b, name)
    msg = str(e.value)
    expected = f"names: a {what} needs a name" if name == "" and "constraint" in what else \
        f"names: {what} name {name!r} is not an identifier"
    assert "\n" not in msg and msg.startswith(expected), msg


def test_identifiers_are_still_names():
    m, x, g, b = _two_bodies()
    for what, declare in DECLARE.items():
        declare(m, x, g, b, "ok_" + what.split()[0] + "2")  # no error


def test_generate_of_a_model_with_an_injected_name_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "inj.py").write_text(
        "from mbforge.model import Model\n"
        "def build():\n"
        "    m = Model('inj')\n"
        "    x = m.coordinate('x', guess=0.5, range=(-2, 2))\n"
        "    y = m.coordinate('y', guess=0.5, range=(-2, 2))\n"
        f"    m.constraint(x * x + y * y - 1.0, {INJECTED!r})\n"
        "    m.drive(x - 0.5 - 0.1 * m.t, 'drv')\n"
        "    return m\n")
    r = mbforge("generate", tmp_path / "inj.py", "--kernel", "kinematics", "--target", "c-double",
                "--out", tmp_path / "k")
    line = one_line(r)
    assert f"constraint name {INJECTED!r} is not an identifier" in line, line
    assert not (tmp_path / "k").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inj.py"]


CRAFTED = [
    ("function", 'toy_affine(in, out); int injected_global = 1; /*', "manifest function"),
    ("function", "int", "manifest function"),
    ("prefix", "x */ int y; /*", "manifest prefix"),
    ("digest", "../../../../tmp/x" + "0" * 47, "manifest digest"),
    ("headers", ['toy.h"\n#include "/etc/passwd'], "manifest names the file"),
    ("sources", ["../toy.c"], "manifest names the file"),
    ("sources", "toy.c", "manifest sources"),
]


def _crafted(tmp_path: Path, field: str, value) -> Path:
    k = tmp_path / "k"
    shutil.copytree(TOY, k)
    d = json.loads((k / "manifest.json").read_text())
    d[field] = value
    (k / "manifest.json").write_text(json.dumps(d))
    return k


@pytest.mark.parametrize("field,value,words", CRAFTED)
def test_hil_refuses_a_crafted_manifest_in_one_line(tmp_path, field, value, words):
    k = _crafted(tmp_path, field, value)
    r = mbforge("hil", "--port", "socket://127.0.0.1:1", "--kernel", k, "--reference", TOY_DOUBLE,
                "--host-model", "--run", tmp_path / "r.sqlite", cwd=tmp_path)
    assert words in one_line(r)


@pytest.mark.parametrize("field,value,words", CRAFTED[:2])
def test_the_host_library_and_firmware_refuse_a_crafted_function(tmp_path, monkeypatch, field, value, words):
    from mbforge.verify.hostlib import HostLibError, load_kernel

    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    k = _crafted(tmp_path, field, value)
    with pytest.raises(HostLibError, match=words):
        load_kernel(k)
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.so"))
    r = mbforge("firmware", "--kernel", k, "--out", tmp_path / "fw")
    assert words in one_line(r) and not (tmp_path / "fw").exists()


def test_the_shipped_fixture_manifests_still_load():
    for d in (TOY, TOY_DOUBLE):
        Manifest.load(d)
    with pytest.raises(ManifestError):
        Manifest.from_dict({**json.loads((TOY / "manifest.json").read_text()), "function": "a b"})
