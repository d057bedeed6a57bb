"""python -m bench: every benchmark against the peers, ratios printed (engine, host C, device)."""
import sys

from . import device, engine, floor, host, idyn

if __name__ == "__main__":
    args = sys.argv[1:]
    code = engine.main(args)
    code |= host.main([a for a in args if a in ("--no-sympy",)])
    code |= device.main([])
    code |= floor.main([])
    code |= idyn.main([])
    sys.exit(code)
