"""Every code block in docs/*.md runs: the ```python blocks of one file in order, in one
namespace, in a fresh interpreter (so a page cannot lean on another page's state or on
this test process), and the ```sh blocks of one file in order in a fresh folder with the
venv's `mbforge` on PATH (tutorial.md's are run by test_tutorial.py, with its files).
```text blocks are printed output, not code. A block may be skipped only when the line
right above it is `<!-- docs-test: skip (reason) -->` with a reason; a block in any other
language must be skipped so, or it fails here."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
RUN = ("python", "sh")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")


def blocks(text: str, lang: str = "python") -> list[tuple[int, str]]:
    """(line number, code) of each `lang` block to run; raises for a skip marker without a
    reason, and for a code block of a language nothing runs that is not skipped."""
    out = []
    for mt in FENCE.finditer(text):
        line = text.count("\n", 0, mt.start()) + 1
        if mt.group("lang") == "text":
            continue
        before = text[:mt.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if "docs-test" in before:
            skip = SKIP.search(before)
            if not skip or not skip.group("reason").strip():
                raise AssertionError(f"line {line}: a skipped block needs `<!-- docs-test: skip (reason) -->`")
            continue
        if mt.group("lang") not in RUN:
            raise AssertionError(f"line {line}: a ```{mt.group('lang')} block that no test runs: "
                                 f"mark it `<!-- docs-test: skip (reason) -->`")
        if mt.group("lang") == lang:
            out.append((line, mt.group("body")))
    return out


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_the_docs_exist():
    names = {p.name for p in pages()}
    assert {"model-api.md", "linearize.md", "kernels.md"} <= names


@pytest.mark.parametrize("page", [p for p in pages() if blocks(p.read_text())], ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path):
    code = blocks(page.read_text())
    # one script; each block is announced so that a failure names its line in the page
    script = "\n".join(f"print('--- {page.name}:{line}', flush=True)\n{body}" for line, body in code)
    (tmp_path / "page.py").write_text(script)
    # the pages call `mbforge` as a reader would: the one installed next to this interpreter
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    r = subprocess.run([sys.executable, str(tmp_path / "page.py")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=env)
    if r.returncode:
        last = [ln for ln in r.stdout.splitlines() if ln.startswith("--- ")][-1:]
        pytest.fail(f"block at {last[0][4:] if last else page.name} failed:\n{r.stderr[-3000:]}")


@pytest.mark.parametrize("page", [p for p in pages() if p.name != "tutorial.md" and blocks(p.read_text(), "sh")],
                         ids=lambda p: p.name)
def test_shell_blocks_run(page, tmp_path):
    code = blocks(page.read_text(), "sh")
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    for line, body in code:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600, env=env)
        assert r.returncode == 0, f"{page.name}:{line} failed:\n{r.stderr[-3000:]}"


def test_the_runner_sees_blocks_and_reasons():
    page = "text\n```python\nx = 1\n```\n<!-- docs-test: skip (needs a board) -->\n```python\nboom\n```\n"
    assert blocks(page) == [(2, "x = 1\n")]
    with pytest.raises(AssertionError, match="needs `<!-- docs-test"):
        blocks("<!-- docs-test: skip () -->\n```python\nboom\n```\n")


def test_contributing_names_files_that_exist():
    """docs/contributing.md lists the files each kind of change touches: each must exist."""
    root = DOCS.parent
    named = set(re.findall(r"`([\w.-]+(?:/[\w.*-]+)+)`", (DOCS / "contributing.md").read_text()))
    files = {n for n in named if "*" not in n}
    assert len(files) > 30
    missing = sorted(n for n in files if not (root / n).exists())
    assert not missing, f"docs/contributing.md names files that do not exist: {missing}"
