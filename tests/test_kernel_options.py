"""The kernel builders' typed options (mbforge.kernels.options): each reaches its builder
from `mbforge generate` flags as the backends' options do, checked before the build."""
import pytest

from mbforge import cli
from mbforge.kernels import builders
from mbforge.kernels.options import KernelOptionError, ReducedOptions, resolve


class _Stop(Exception):
    pass


@pytest.mark.parametrize("argv, kernel, expect", [
    (["slidercrank", "--kernel", "forward-dynamics", "--method", "lu"], "forward-dynamics", {"method": "lu"}),
    (["stewart", "--kernel", "inverse-dynamics-reduced", "--method", "full", "--with-multipliers",
      "--domain-steps", "4"], "inverse-dynamics-reduced", {"method": "full", "multipliers": True, "domain_steps": 4}),
    (["fourbar", "--kernel", "linearized-dynamics", "--drivers", "keep", "--coordinates", "phi1"],
     "linearized-dynamics", {"drivers": "keep", "coordinates": "phi1", "velocities": None}),
])
def test_a_kernel_flag_reaches_its_builder(monkeypatch, tmp_path, argv, kernel, expect):
    seen = {}

    def spy(eqs, **args):
        seen.update(args)
        raise _Stop
    monkeypatch.setitem(builders.BUILDERS, kernel, spy)
    with pytest.raises(_Stop):
        cli.main(["generate", *argv, "--out", str(tmp_path / "k")])
    assert {k: seen[k] for k in expect} == expect


@pytest.mark.parametrize("argv, message", [
    (["fourbar", "--kernel", "equations", "--method", "lu"],
     "--method goes with --kernel forward-dynamics or inverse-dynamics-reduced, not --kernel equations"),
    (["slidercrank", "--kernel", "forward-dynamics", "--method", "projected"],
     "--method projected: must be one of auto, ldlt, lu"),
    (["stewart", "--kernel", "inverse-dynamics-reduced", "--domain-steps", "0"],
     "--domain-steps 0: must be a positive integer"),
])
def test_a_kernel_flag_it_does_not_take_is_one_line(tmp_path, capsys, argv, message):
    assert cli.main(["generate", *argv, "--out", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "k").exists()


def test_kernel_options_resolve_like_backend_options():
    o = resolve("inverse-dynamics-reduced", {"with_multipliers": True})
    assert isinstance(o, ReducedOptions) and o.builder_args() == {"method": "auto", "multipliers": True,
                                                                  "domain_steps": 96}
    with pytest.raises(KernelOptionError, match="option domain_steps=0: must be a positive integer"):
        resolve("inverse-dynamics-reduced", {"domain_steps": 0})
    with pytest.raises(KernelOptionError, match="unknown option colour for kernel equations"):
        resolve("equations", {"colour": "red"})
