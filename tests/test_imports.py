"""No import cycle among mbforge's modules (and bench's), read from the sources with `ast`:
every `import` and `from ... import` at module level and inside functions (relative ones
resolved), since a function-level import that closes a loop is the same knot, only tied
later. `from a.b import c` is an edge to the module a.b.c when c is one, else to a.b;
importing a.b.c also runs the packages a and a.b (edges to them), except a module's own
ancestors, which the import system has initialised before it.

ALLOWED lists cycles tolerated for a while (none today); each must still exist (remove its
entry when it is gone), and any other cycle fails with its path printed."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import ROOT
from helpers.packaging import modules, package_folders

# cycle (its modules) -> why it is still here
ALLOWED: dict = {}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that the file of module `name` imports anywhere in it."""
    package = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t not in known and "." in t:  # an attribute of a module: the module
                t = t.rsplit(".", 1)[0]
            if t not in known:
                continue
            parts = t.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}  # the packages run first
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, len(name.split(".")))}
    return {m for m in found if m in known} - ancestors - {name}


def import_graph(folders: dict[str, Path]) -> dict[str, set[str]]:
    mods = modules(folders)
    return {name: imported(name, path, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path back to its start) per strongly connected component of more than
    one module (Tarjan, iteratively)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(_loop(graph, set(comp)))
    return out


def _loop(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself."""
    start = min(comp)
    prev, frontier = {}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no loop in {comp}")


def repository_folders() -> dict[str, Path]:
    return {**package_folders(), "bench": ROOT / "bench"}


def test_no_import_cycle_but_the_allowed_ones():
    found = cycles(import_graph(repository_folders()))
    new = [c for c in found if frozenset(c) not in ALLOWED]
    assert not new, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in new)
    gone = set(ALLOWED) - {frozenset(c) for c in found}
    assert not gone, f"no longer a cycle, remove it from ALLOWED: {[sorted(g) for g in gone]}"


def test_every_module_is_read():
    graph = import_graph(repository_folders())
    assert len(graph) > 100 and {"mbforge", "mbforge.cli", "mbforge.hil.harness", "bench.floor"} <= set(graph)
    # edges the checker must see: module level, function level, relative, through a package
    assert "mbforge.domain.explicit_cover" in graph["mbforge.domain.cover"]
    assert "mbforge.analysis.forms" in graph["mbforge.analysis.solve_error"]  # from .forms import
    assert "mbforge.modelflags" in graph["mbforge.cli"]  # inside cmd_generate
    assert "mbforge.kernels.builders" in graph["mbforge.modelflags"]  # inside model_kernel
    assert "mbforge.model" in graph["mbforge.reference.solvers"]  # runs the package mbforge.model


def test_verify_and_hdl_never_import_hil():
    """mbforge.verify (vectors, comparison, Device, host library) is what hil and hdl share;
    the serial link (mbforge.hil) is hil's alone: no module of verify or hdl imports it,
    at module or function level, and the shared modules have one home, verify."""
    graph = import_graph(repository_folders())
    shared = {"mbforge.verify." + m for m in ("device", "vectors", "compare", "hostlib")}
    assert shared <= set(graph) and not {m.replace(".verify.", ".hil.") for m in shared} & set(graph)
    checked = [m for m in graph if m.startswith(("mbforge.verify", "mbforge.hdl"))]
    bad = {m: sorted(t for t in graph[m] if t.startswith("mbforge.hil")) for m in checked}
    assert not {m: t for m, t in bad.items() if t}, f"imports of mbforge.hil: {bad}"
    assert shared & graph["mbforge.hil.harness"] and shared & graph["mbforge.hdl.sim"]  # both use it


def _reached(graph, stage: str) -> list[str]:
    """The modules of a stage and every module they reach, directly or through others."""
    seen = [m for m in graph if m == stage or m.startswith(stage + ".")]
    todo = list(seen)
    while todo:
        for n in graph[todo.pop()]:
            if n not in seen:
                seen.append(n)
                todo.append(n)
    return seen


@pytest.mark.parametrize("stage, above", [
    # reference -> domain -> kernels: the domain never reaches a kernel
    ("mbforge.domain", ("mbforge.kernels",)),
    # the solvers judge kernels and never make one, nor load a model by name (mbforge.simulate does)
    ("mbforge.reference", ("mbforge.kernels", "mbforge.pipeline", "mbforge.examples", "mbforge.simulate")),
])
def test_a_stage_never_imports_the_stages_above_it(stage, above):
    seen = _reached(import_graph(repository_folders()), stage)
    assert len([m for m in seen if m.startswith(stage)]) > 3
    assert not [m for m in seen if m in above or m.startswith(tuple(a + "." for a in above))]


def test_the_checker_finds_a_function_level_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("import os\n\ndef g():\n    from pkg import a\n")
    (pkg / "d.py").write_text("from . import c\n")  # reaches the cycle, is not in it
    graph = import_graph({"pkg": pkg, "pkg.sub": pkg / "sub"})
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
