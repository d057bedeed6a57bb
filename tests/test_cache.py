"""The disk cache (mbforge.cache) of the envelope cover's enclosures, the check of its
closed forms and the driven motion: a warm command writes byte for byte what a cold one
does without running them again; a changed closed form is checked again (and refused);
a damaged entry, an unwritable folder or MBFORGE_CACHE_DIR=off only cost time."""
from pathlib import Path

import pytest

import mbforge.kernels.explicit_cover as EC
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import KernelError
from mbforge.kernels.cover import envelope_cover
from mbforge.model import Model
from mbforge.pipeline import generate
from mbforge.reference.solvers import Kinematics


@pytest.fixture
def analyses(monkeypatch):
    """How many times the cover's range analysis ran."""
    calls = []
    real = EC.analyse_chunked

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(EC, "analyse_chunked", counted)
    return calls


def files(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def generate_stewart(out: Path, cells: int | None = None) -> dict:
    eqs = load("stewart").equations()
    if cells:
        eqs.envelope = eqs.envelope.override({"quantities": {"plat_x": {"cells": cells}}}, "test", list(eqs.actuator_names))
    generate(build_kernel(eqs, "equations"), "c-double").write(out)
    return files(out)


def test_warm_run_writes_the_same_bytes_without_the_analysis(tmp_path, monkeypatch, analyses):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    cold = generate_stewart(tmp_path / "cold")
    assert len(analyses) == 1 and len(list((tmp_path / "cache" / "cover").glob("*.npz"))) == 1
    warm = generate_stewart(tmp_path / "warm")
    assert len(analyses) == 1 and warm == cold
    # another envelope is another entry (the key holds the cells' boxes)
    generate_stewart(tmp_path / "finer", cells=2)
    assert len(analyses) == 2 and len(list((tmp_path / "cache" / "cover").glob("*.npz"))) == 2
    assert not list((tmp_path / "cache" / "cover").glob("*.tmp"))


def test_a_damaged_entry_is_recomputed_and_replaced(tmp_path, monkeypatch, analyses):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    cold = generate_stewart(tmp_path / "cold")
    [entry] = (tmp_path / "cache" / "cover").glob("*.npz")
    entry.write_bytes(b"PK\x03\x04 not a zip any more")
    assert generate_stewart(tmp_path / "again") == cold and len(analyses) == 2
    assert generate_stewart(tmp_path / "third") == cold and len(analyses) == 2  # replaced by a good one


@pytest.mark.parametrize("where", ["off", "a_file"])
def test_no_cache_or_an_unwritable_one_changes_nothing_but_time(tmp_path, monkeypatch, analyses, where):
    if where == "a_file":
        (tmp_path / "a_file").write_text("not a folder")
        monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "a_file"))
    else:
        monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    first = generate_stewart(tmp_path / "first")
    second = generate_stewart(tmp_path / "second")
    assert first == second and len(analyses) == 2


def test_warm_run_solves_no_motion_and_checks_no_closed_form_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    solved, checked = [], []
    real_batched, real_eval = Kinematics._motion_batched, EC.Evaluator

    def batched(self, *a, **k):
        solved.append(1)
        return real_batched(self, *a, **k)

    def evaluator(outputs, inputs):  # check_forms' residuals take q, qd, qdd and t
        checked.append(len(inputs))
        return real_eval(outputs, inputs)
    monkeypatch.setattr(Kinematics, "_motion_batched", batched)
    monkeypatch.setattr(EC, "Evaluator", evaluator)
    cold = generate_stewart(tmp_path / "cold")
    assert solved == [1] and 3 * 98 + 1 in checked
    solved.clear(), checked.clear()
    warm = generate_stewart(tmp_path / "warm")
    assert warm == cold and solved == [] and 3 * 98 + 1 not in checked
    assert {p.name for p in (tmp_path / "cache").iterdir()} == {"cover", "forms", "motion"}


def _hyperbola(scale: float):
    """b = scale / a on a b = 1: the closed form is right for scale 1 only."""
    m = Model("hyperbola")
    a = m.coordinate("a", guess=0.5, range=(-1, 1))
    b = m.coordinate("b", guess=2.0, range=(-100, 100))
    m.constraint(a * b - 1.0, "hyp")
    m.explicit(b, scale / a)
    m.operate(a, range=(0.5, 1.0), rate=(-1.0, 1.0), accel=(-1.0, 1.0), cells=4)
    return m.equations()


def test_a_wrong_closed_form_is_refused_with_a_warm_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    envelope_cover(_hyperbola(1.0))
    assert len(list((tmp_path / "cache" / "forms").glob("*.npz"))) == 1
    with pytest.raises(KernelError, match=r"^hyperbola: the explicit coordinates do not satisfy hyp \(\|residual\| "
                                          r"up to .*\) at \d+ consistent states of the operating envelope$"):
        envelope_cover(_hyperbola(1.001))
    assert len(list((tmp_path / "cache" / "forms").glob("*.npz"))) == 1  # a failed check is not kept


@pytest.mark.parametrize("model,kernel,target", [("slidercrank", "forward-dynamics", "c-fixed"),
                                                 ("fourbar", "kinematics", "verilog"),
                                                 ("stewart", "kinematics", "c-float32")])
def test_a_kept_analysis_gives_the_same_files_without_analysing(tmp_path, monkeypatch, model, kernel, target):
    """The fixed-point program and the float32 bounds come back from the cache equal: the
    same bytes in every file, and the backend's analysis does not run again; another
    option of the target (the prefix here) reads the same entry."""
    from mbforge.backends import get_backend

    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    backend = type(get_backend(target))
    runs = []
    real = backend.analyse

    def counted(self, *a, **k):
        runs.append(1)
        return real(self, *a, **k)
    monkeypatch.setattr(backend, "analyse", counted)

    def gen(out, prefix=None):
        generate(build_kernel(load(model).equations(), kernel), target, prefix=prefix).write(tmp_path / out)
        return files(tmp_path / out)
    cold = gen("cold")
    assert runs == [1] and len(list((tmp_path / "cache" / "analysis").glob("*.npz"))) == 1
    assert gen("warm") == cold and runs == [1]
    renamed = gen("renamed", prefix="other")
    assert runs == [1] and any(b"other_" in v for v in renamed.values())


def test_a_damaged_analysis_entry_is_analysed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    k = lambda: build_kernel(load("slidercrank").equations(), "forward-dynamics")  # noqa: E731
    generate(k(), "c-fixed").write(tmp_path / "cold")
    [entry] = (tmp_path / "cache" / "analysis").glob("*.npz")
    import numpy as np
    np.savez(entry, text=np.array('{"plan": "not a program"}'))
    generate(k(), "c-fixed").write(tmp_path / "again")
    assert files(tmp_path / "again") == files(tmp_path / "cold")


def test_the_cache_keeps_under_its_limit_dropping_the_least_recently_used(tmp_path, monkeypatch):
    import os

    import numpy as np

    from mbforge import cache

    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MBFORGE_CACHE_MAX_MB", "1")
    blob = np.zeros(300_000 // 8)  # 300 kB an entry
    for i in range(3):
        cache.store("test", f"k{i}", x=blob)
        os.utime(tmp_path / "cache" / "test" / f"k{i}.npz", (1000 + i, 1000 + i))  # k0 the oldest
    assert cache.load("test", "k0") is not None  # read: now the most recently used
    cache.store("test", "k3", x=blob)  # 1.2 MB > 1 MB: down to 0.75 MB, k1 and k2 go
    left = sorted(p.stem for p in (tmp_path / "cache" / "test").glob("*.npz"))
    assert left == ["k0", "k3"], left


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_a_bad_cache_limit_is_one_line_before_any_work(tmp_path, monkeypatch, capsys, value):
    from mbforge import cli

    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MBFORGE_CACHE_MAX_MB", value)
    rc = cli.main(["generate", "fourbar", "--out", str(tmp_path / "k")])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"mbforge generate: error: MBFORGE_CACHE_MAX_MB: expected a whole number of megabytes, " \
                              f"1 or more; got {value!r}\n", err
    assert not (tmp_path / "k").exists() and not (tmp_path / "cache").exists()
