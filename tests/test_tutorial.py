"""docs/tutorial.md as a new user follows it: each ```python block is written to the file its
first line names (`# crank_rocker.py`), each ```sh block runs in order in one empty folder,
with the installed `mbforge` on the PATH, and must exit 0. The real PlatformIO build, QEMU
and Icarus run, so the tutorial's claims (HIL PASS, RTL bit-exact) are checked too."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(?P<lang>\w+)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
NAMED = re.compile(r"#\s*(?P<name>[\w./-]+\.py)\s*$")


def steps(text: str) -> list[tuple[str, str, str]]:
    """(kind, file name or "", body) of the blocks to act on: ("file", name, code) for python,
    ("sh", "", commands) for shell; other blocks (text, c) are what the user sees."""
    out = []
    for mt in FENCE.finditer(text):
        lang, body = mt.group("lang"), mt.group("body")
        if lang == "python":
            first = body.split("\n", 1)[0]
            named = NAMED.fullmatch(first)
            if not named:
                line = text.count("\n", 0, mt.start()) + 1
                raise AssertionError(f"tutorial.md:{line}: a python block must name its file in its first line")
            out.append(("file", named.group("name"), body))
        elif lang == "sh":
            out.append(("sh", "", body))
    return out


def test_the_tutorial_has_its_steps():
    kinds = [k for k, _, _ in steps(TUTORIAL.read_text())]
    assert kinds[0] == "file" and kinds.count("sh") >= 5
    commands = " ".join(b for k, _, b in steps(TUTORIAL.read_text()) if k == "sh")
    for cmd in ("mbforge generate", "mbforge firmware", "mbforge hil --emulate", "mbforge hdl"):
        assert cmd in commands, cmd


@pytest.mark.firmware
@pytest.mark.hdl
@pytest.mark.slow
def test_the_tutorial_runs(tmp_path):
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    outputs = []
    for kind, name, body in steps(TUTORIAL.read_text()):
        if kind == "file":
            (tmp_path / name).write_text(body)
            continue
        r = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, f"{body}\n{r.stdout}\n{r.stderr}"
        outputs.append(r.stdout)
    everything = "\n".join(outputs)
    assert everything.count("PASS") >= 2  # the HIL report and the Icarus simulation
    assert "bit-exact with the c-fixed host model: True" in everything
    assert (tmp_path / "build" / "hil.json").exists()
    assert "state (th1, th1_d)" in (tmp_path / "build" / "lin" / "crank_rocker.h").read_text()
