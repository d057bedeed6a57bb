"""python -m bench: every benchmark against the peers, ratios printed (engine, host C, device)."""
import sys

from . import device, engine, host, idyn, rtl

if __name__ == "__main__":
    args = sys.argv[1:]
    code = engine.main(args)
    code |= host.main([a for a in args if a in ("--no-sympy",)])
    code |= device.main([])
    code |= idyn.main([])
    code |= rtl.main(["--pnr"])
    sys.exit(code)
