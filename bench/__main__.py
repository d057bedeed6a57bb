"""python -m bench: every benchmark against the peers, ratios printed (engine, host C, device, arms,
URDF robots, the step kernel against MuJoCo), and the whole generate command against its goal."""
import sys

from . import arms, command, device, engine, floor, host, idyn, rtl, run, step, urdf


def main(args: list[str]) -> int:
    code = engine.main(args)
    code |= host.main([a for a in args if a in ("--no-sympy",)])
    code |= device.main([])
    code |= floor.main([])
    code |= idyn.main([])
    code |= arms.main([])
    code |= urdf.main([])
    code |= command.main([])
    code |= step.main([])
    code |= rtl.main(["--pnr"])
    return code


if __name__ == "__main__":
    run("all", lambda: main(sys.argv[1:]))
