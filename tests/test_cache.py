"""The disk cache of the envelope cover's enclosures (mbforge.cache): a warm command
writes byte for byte what a cold one does without running the cover's range analysis;
a damaged entry, an unwritable folder or MBFORGE_CACHE_DIR=off only cost time."""
from pathlib import Path

import pytest

import mbforge.kernels.explicit_cover as EC
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate


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
