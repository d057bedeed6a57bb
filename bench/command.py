"""Generate-command benchmark (issue 14, item 3): the whole `mbforge generate` command as a
user runs it, interpreter start, imports and writing included.

Each run is a fresh process of the `mbforge` console script (or `python -m mbforge.cli`
when there is none) writing into a new temporary folder. As an installed package, the
runs read compiled bytecode: a first run, reported apart, writes it to a temporary cache
(PYTHONPYCACHEPREFIX, so the source tree stays clean, even when the environment says
PYTHONDONTWRITEBYTECODE, which would make every run compile mbforge's sources, about
0.1-0.3 s), and fills a temporary mbforge.cache (MBFORGE_CACHE_DIR: the envelope cover's
enclosures, which a user's second command on the same model and envelope reads); one run
with the cache off (MBFORGE_CACHE_DIR=off, the cover computed) is reported apart too.
Prints every run's wall time and
CPU time (user + system of the child, which a loaded machine inflates less than the wall
time), their medians and the ratio of the median wall time to the goal; then one run with
--verbose for the time by stage.

    python -m bench.command [--runs 5] [--model stewart] [--kernel equations] [--target c-double] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.6  # seconds: the Stewart equations in c-double, issue 14


def _command() -> list[str]:
    script = Path(sys.executable).parent / "mbforge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mbforge.cli"]


def run_once(args: list[str], verbose: bool = False, env: dict | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s, stderr) of one `mbforge generate` in a fresh process."""
    out = tempfile.mkdtemp(prefix="mbforge-bench-")
    try:
        cmd = [*_command(), "generate", *args, "--out", out] + (["--verbose"] if verbose else [])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu, r.stderr
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", default="stewart")
    ap.add_argument("--kernel", default="equations")
    ap.add_argument("--target", default="c-double")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    gen = [args.model, "--kernel", args.kernel, "--target", args.target]
    print(f"Whole command: mbforge generate {' '.join(gen)} (fresh process per run, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    cache = tempfile.mkdtemp(prefix="mbforge-bench-pycache-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "py")
    env["MBFORGE_CACHE_DIR"] = os.path.join(cache, "mbforge")
    try:
        return _measure(args, gen, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _measure(args, gen: list[str], env: dict) -> int:
    wall, cpu, _ = run_once(gen, env=env)
    print(f"  first run (writes the bytecode and mbforge caches, not counted): wall {wall:.3f} s, CPU {cpu:.3f} s")
    wall, cpu, _ = run_once(gen, env={**env, "MBFORGE_CACHE_DIR": "off"})
    print(f"  a run with MBFORGE_CACHE_DIR=off (the cover computed, not counted): wall {wall:.3f} s, CPU {cpu:.3f} s")
    walls, cpus = [], []
    for k in range(args.runs):
        wall, cpu, _ = run_once(gen, env=env)
        walls.append(wall)
        cpus.append(cpu)
        print(f"  run {k + 1}: wall {wall:.3f} s, CPU {cpu:.3f} s")
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"median of {args.runs}: wall {wall:.3f} s, CPU {cpu:.3f} s; "
          f"wall / goal {GOAL} s = {wall / GOAL:.2f} (target <= 1.0)")
    try:
        _, _, stages = run_once(gen, verbose=True, env=env)
    except RuntimeError:  # a version without --verbose
        stages = ""
    print("by stage (one more run, --verbose):" if stages else "(no --verbose in this version)")
    for line in stages.splitlines():
        print("  " + line.split(": ", 1)[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": gen, "wall": walls, "cpu": cpus, "median_wall": wall, "median_cpu": cpu,
                       "goal": GOAL, "stages": stages.splitlines()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
