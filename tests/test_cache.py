"""The disk cache (mbforge.cache) of the envelope cover's enclosures, the check of its
closed forms and the driven motion: a warm command writes byte for byte what a cold one
does without running them again; a changed closed form is checked again (and refused);
a damaged entry, an unwritable folder or MBFORGE_CACHE_DIR=off only cost time."""
from pathlib import Path

import pytest

import mbforge.domain.explicit_cover as EC
from mbforge.domain import DomainError
from mbforge.domain.cover import envelope_cover
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
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
    with pytest.raises(DomainError, match=r"^hyperbola: the explicit coordinates do not satisfy hyp \(\|residual\| "
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


# ---- entries that are not what they claim (issue 31, item 2) ---------------------------------
def _cli_generate(tmp_path, out: str, model: str, kernel: str, cache_dir, config=None):
    """The real `mbforge generate` in a fresh process: (return code, stderr, files)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MBFORGE_CACHE_DIR": str(cache_dir), "XDG_CONFIG_HOME": str(config or tmp_path / "config")}
    r = subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", model, "--kernel", kernel,
                        "--target", "c-fixed", "--out", str(tmp_path / out)], capture_output=True, text=True,
                       env=env, timeout=600)
    return r.returncode, r.stderr, files(tmp_path / out) if r.returncode == 0 else None


def _resave(entry: Path, **changes) -> None:
    """Write the entry again as valid .npz with some of its arrays changed."""
    import numpy as np

    with np.load(entry) as z:
        arrays = {n: z[n] for n in z.files}
    arrays.update(changes)
    with open(entry, "wb") as f:
        np.savez(f, **arrays)


def _scaled_errors(entry: Path) -> dict:
    import json

    import numpy as np

    with np.load(entry) as z:
        d = json.loads(str(z["text"]))
    assert any(e for e in d["error"])  # a list worth scaling
    d["error"] = [None if e is None else e * 1e-6 for e in d["error"]]
    return {"text": np.array(json.dumps(d))}


def _tamper(how: str, entry: Path, other: Path, config: Path) -> None:
    import numpy as np

    from mbforge import cache

    with np.load(entry) as z:
        arrays = {n: z[n] for n in z.files if n not in cache.META}
        key = str(z["__key__"])
    secret = (config / "mbforge" / "cache-key").read_bytes()
    if how == "swap":  # another kernel's valid entry in this one's place
        entry.write_bytes(other.read_bytes())
    elif how == "scaled":  # error bounds 1e6 times smaller, saved again with the fields it had
        _resave(entry, **_scaled_errors(entry))
    elif how == "forged":  # ... and its digest made again, without the user's key
        arrays = _scaled_errors(entry)
        _resave(entry, **arrays, __mac__=np.array(cache._mac(b"guessed" * 5, "analysis", key, arrays)))
    elif how == "kind":  # a valid entry of another kind under this key
        _resave(entry, __kind__=np.array("motion"), __mac__=np.array(cache._mac(secret, "motion", key, arrays)))
    elif how == "bare":  # the arrays alone, as before entries said what they are for
        np.savez(entry, **arrays)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["swap", "scaled", "forged", "kind", "bare"])
def test_an_entry_that_is_not_this_keys_is_recomputed_with_one_warning(tmp_path, how):
    """Whatever is put in an analysis entry's place, the kernel folder is byte for byte the
    one an uncached run writes, and one line names the entry."""
    rc, err, uncached = _cli_generate(tmp_path, "uncached", "slidercrank", "forward-dynamics", "off")
    assert rc == 0 and err == ""
    cache_dir = tmp_path / "cache"
    _cli_generate(tmp_path, "other", "fourbar", "kinematics", cache_dir)
    [other] = (cache_dir / "analysis").glob("*.npz")
    rc, err, cold = _cli_generate(tmp_path, "cold", "slidercrank", "forward-dynamics", cache_dir)
    assert rc == 0 and err == "" and cold == uncached
    [entry] = set((cache_dir / "analysis").glob("*.npz")) - {other}
    _tamper(how, entry, other, tmp_path / "config")
    rc, err, tampered = _cli_generate(tmp_path, "tampered", "slidercrank", "forward-dynamics", cache_dir)
    assert rc == 0 and tampered == uncached, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mbforge: warning: cache entry {entry} ") \
        and lines[0].endswith(": not used, computed again"), err
    rc, err, again = _cli_generate(tmp_path, "again", "slidercrank", "forward-dynamics", cache_dir)
    assert rc == 0 and err == "" and again == uncached  # the entry was stored again, rightly


@pytest.mark.parametrize("how", ["world_readable", "symlink", "short"])
def test_a_cache_key_file_not_private_to_the_user_turns_the_cache_off(tmp_path, how):
    config = tmp_path / "config"
    key = config / "mbforge" / "cache-key"
    key.parent.mkdir(parents=True)
    if how == "world_readable":
        key.write_bytes(b"k" * 32)
        key.chmod(0o644)
    elif how == "symlink":
        (tmp_path / "elsewhere").write_bytes(b"k" * 32)
        (tmp_path / "elsewhere").chmod(0o600)
        key.symlink_to(tmp_path / "elsewhere")
    else:
        key.write_bytes(b"k" * 5)
        key.chmod(0o600)
    rc, err, uncached = _cli_generate(tmp_path, "uncached", "fourbar", "kinematics", "off", config)
    rc, err, got = _cli_generate(tmp_path, "got", "fourbar", "kinematics", tmp_path / "cache", config)
    assert rc == 0 and got == uncached
    assert err.startswith("mbforge: warning: the cache is not used: the cache key file ") and \
        len(err.splitlines()) == 1, err
    assert not list((tmp_path / "cache").rglob("*.npz"))


def test_a_new_cache_key_is_private(tmp_path):
    import stat

    rc, err, _ = _cli_generate(tmp_path, "k", "fourbar", "kinematics", tmp_path / "cache")
    st = (tmp_path / "config" / "mbforge" / "cache-key").stat()
    assert rc == 0 and err == "" and stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32
    assert list((tmp_path / "cache" / "analysis").glob("*.npz"))


def test_compiled_templates_swapped_in_the_cache_are_not_run(tmp_path):
    """The compiled templates are code: two entries swapped are both refused (a line each)
    and the kernel is written as without a cache."""
    rc, err, uncached = _cli_generate(tmp_path, "uncached", "fourbar", "kinematics", "off")
    _cli_generate(tmp_path, "cold", "fourbar", "kinematics", tmp_path / "cache")
    a, b = sorted((tmp_path / "cache" / "jinja").glob("*.npz"))[:2]
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b), b.write_bytes(data_a)
    rc, err, got = _cli_generate(tmp_path, "got", "fourbar", "kinematics", tmp_path / "cache")
    assert rc == 0 and got == uncached
    assert sorted(line.split()[4] for line in err.splitlines()) == sorted([str(a), str(b)]), err


def test_tape_hints_go_into_the_key_field_by_field():
    # the hints of a kernel's solves are typed (lower.tape.TapeHints, one SolveKey per solve):
    # every field is in the key by name, and a solve whose pivots differ has another key
    import dataclasses

    from mbforge.analysis.linear import SolveKey
    from mbforge.analysis.piececache import hints_key
    from mbforge.lower.tape import TapeHints

    tape = build_kernel(load("stewart").equations(), "inverse-dynamics-reduced", domain_steps=4).tape()
    assert isinstance(tape.hints, TapeHints)
    [key] = tape.hints.key()
    text = hints_key(tape.hints)
    assert isinstance(key, SolveKey) and all(f"{f.name}=" in text for f in dataclasses.fields(SolveKey))
    other = dataclasses.replace(key, steps=key.steps[::-1])

    class Other(TapeHints):
        def __call__(self, in_lo, in_hi):
            return {}

        def key(self):
            return (other,)
    assert hints_key(Other()) != text and hints_key(None) == "none"


@pytest.mark.parametrize("target, kind", [("c-double", "Analysis"), ("c-float32", "Float32Analysis"),
                                          ("c-fixed", "FixedAnalysis")])
def test_an_analysis_comes_back_from_its_text_as_its_own_type(target, kind):
    from mbforge import backends

    k = build_kernel(load("fourbar").equations(), "kinematics")
    plan = generate(k, target)
    a = plan.analysis
    assert type(a) is getattr(backends, kind)
    back = backends.Analysis.from_text(plan.schedule.tape, a.text())
    assert type(back) is type(a)
    assert (back.in_frac_bits, back.out_frac_bits, back.out_error) == (a.in_frac_bits, a.out_frac_bits, a.out_error)
    if kind == "FixedAnalysis":
        from mbforge.analysis.fixedpoint import program_text
        assert program_text(back.plan) == program_text(a.plan)
