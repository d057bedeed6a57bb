"""docs/urdf.md's tutorial as a reader follows it: its sh block (the one marked as run here)
runs in an empty folder with the installed `mbforge` and `python` on the PATH: the UR5's
URDF to the inverse-dynamics kernel, the firmware built by PlatformIO, run in QEMU and
compared over serial by `mbforge hil`, which must print PASS."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "urdf.md"
BLOCK = re.compile(r"<!-- docs-test: skip \(firmware in QEMU: run by tests/test_urdf_tutorial.py\) -->\n"
                   r"```sh\n(?P<body>.*?)^```", re.S | re.M)


def test_the_tutorial_block_is_there():
    (body,) = BLOCK.findall(PAGE.read_text())
    for cmd in ("mbforge generate", "--kernel inverse-dynamics-rnea", "mbforge firmware", "mbforge hil --emulate"):
        assert cmd in body, cmd


@pytest.mark.firmware
@pytest.mark.needs(dists=("example-robot-data",))
def test_the_urdf_tutorial_runs(tmp_path):
    (body,) = BLOCK.findall(PAGE.read_text())
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "PASS" in r.stdout.splitlines(), r.stdout[-2000:]
    assert "ur5" in (tmp_path / "ur5-id32" / "manifest.json").read_text()
