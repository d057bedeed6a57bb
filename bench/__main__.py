"""python -m bench: run every benchmark against the peers and print the ratios."""
import sys

from . import engine

if __name__ == "__main__":
    sys.exit(engine.main(sys.argv[1:]))
