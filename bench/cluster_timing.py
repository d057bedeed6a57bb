"""The envelope analysis on dask.distributed (analysis.parallel): the wall time of

    mbforge generate stewart --kernel inverse-dynamics-reduced --target T

per target, run in one process (MBFORGE_JOBS=1), with no configuration (the command's own
LocalCluster on the machine's cores: its start-up included) and on an existing cluster of
1 and 2 workers (a LocalCluster started here, named with --scheduler). Every run uses an
empty cache folder (nothing reused), and every kernel folder must hold the same bytes.

    python -m bench.cluster_timing [--targets c-fixed,c-float32] [--workers 1,2] [--model stewart]
        [--kernel inverse-dynamics-reduced] [--no-one-process] [--keep DIR] [--json FILE]

Exit status 0 when every configuration wrote the same files, else 1. The machine may be
shared: each figure is printed with the 1-minute load average at its end; quote them with it.
Figures: docs/cluster.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import run


def _generate(model: str, kernel: str, target: str, out: Path, env: dict, extra: list[str]) -> float:
    cmd = [str(Path(sys.executable).parent / "mbforge"), "generate", model, "--kernel", kernel, "--target", target,
           "--out", str(out), *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return wall


def _files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _configs(workers: list[int], one_process: bool):
    """(name, MBFORGE_JOBS or None, workers of an existing cluster or None)."""
    if one_process:
        yield "one process (MBFORGE_JOBS=1)", "1", None
    yield "no configuration (local cluster on the cores)", None, None
    for w in workers:
        yield f"--scheduler, {w} worker{'s' * (w > 1)}", None, w


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster_timing")
    ap.add_argument("--targets", default="c-fixed,c-float32")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--model", default="stewart")
    ap.add_argument("--kernel", default="inverse-dynamics-reduced")
    ap.add_argument("--no-one-process", action="store_true", help="leave out the MBFORGE_JOBS=1 run")
    ap.add_argument("--keep", type=Path, default=None, help="keep the kernel folders here (TARGET-CONFIG)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    from distributed import LocalCluster

    root = a.keep or Path(tempfile.mkdtemp(prefix="mbforge-cluster-timing-"))
    rows, same = [], True
    for target in a.targets.split(","):
        first = None
        for i, (name, jobs, workers) in enumerate(_configs([int(w) for w in a.workers.split(",")], not a.no_one_process)):
            env = {k: v for k, v in os.environ.items() if k not in ("MBFORGE_JOBS", "MBFORGE_DASK_SCHEDULER")}
            env["MBFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="mbforge-cluster-timing-cache-")
            if jobs:
                env["MBFORGE_JOBS"] = jobs
            out = root / f"{target}-{i}"
            if workers:
                with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
                    wall = _generate(a.model, a.kernel, target, out, env, ["--scheduler", cluster.scheduler_address])
            else:
                wall = _generate(a.model, a.kernel, target, out, env, [])
            files = _files(out)
            first = first or files
            rows.append({"target": target, "config": name, "wall_s": round(wall, 1), "load1": os.getloadavg()[0],
                         "same_bytes": files == first})
            same &= files == first
            print(f"{target:10s} {name:48s} {wall:7.1f} s  load {os.getloadavg()[0]:5.2f}  "
                  f"{'same bytes' if files == first else 'DIFFERENT BYTES'}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    run("cluster_timing", lambda: main(sys.argv[1:]))
