"""Compile bench's two Pinocchio C++ programs once (scripts/bootstrap.sh runs this):
bench/pin_export.cpp (Pinocchio's RNEA, ABA, CRBA over casadi::SX, for bench.arms and
bench.urdf) and bench/pin_time.cpp (Pinocchio's own double C++, bench.urdf). Each is cached
by its source, flags and the versions it depends on (bench.arms.pin_binary), so a second
run, or a fresh clone on the same machine, compiles nothing.

    python -m bench.pin_programs

Exit status 1 if a program does not compile; 0 (with the reason) where pin or casadi is
not installed, as the benches then report "not measured".
"""
from __future__ import annotations

import sys

from .arms import pinocchio_exporter
from .urdf import pin_time_program


def main() -> int:
    status = 0
    for name, make in (("pin_export", pinocchio_exporter), ("pin_time", pin_time_program)):
        cmd, why = make()
        print(f"[bootstrap] {name}: {cmd[-1] if cmd else why}", flush=True)
        status |= cmd is None and "did not compile" in why
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
