"""mbforge: symbolic multibody models to straight-line code for real-time hardware.

    model (Python API)      mbforge.model      coordinates, constraints, bodies, forces
      -> equations (atoms)  mbforge.ir         interned atoms, d/dq, d/dt, subs, evaluator
      -> reference          mbforge.reference  double-precision solvers: motion, mobility, dynamics
      -> domain             mbforge.domain     where a kernel runs: verified covers, tubes, samples
      -> kernel             mbforge.kernels    what a device computes, as ports over atoms
      -> tape, schedule     mbforge.lower      one tape, scheduled for registers or depth
      -> analyses           mbforge.analysis   ranges, float and fixed error bounds, Q formats
      -> backend(target)    mbforge.backends   one backend per target
      -> plan of files      mbforge.pipeline   {name: text} + manifest.json, then written
      -> build              mbforge.firmware   PlatformIO projects, QEMU
      -> verify             mbforge.verify     vectors, the one comparison, the host library
           on a board       mbforge.hil        serial link and harness against the double reference
           in RTL           mbforge.hdl        cocotb benches of the generated Verilog
    the motion, host or board mbforge.simulate  `mbforge simulate`: reference runs, step kernels on a board
"""
__version__ = "0.1.0"


def __getattr__(name: str):
    # mbforge.linearize without importing numpy/scipy with the package
    if name in ("linearize", "Linearization", "LinearizationError"):
        from .reference import linearize as _lin

        return getattr(_lin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
