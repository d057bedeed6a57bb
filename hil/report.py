"""What people read after a HIL run: a single-file HTML report, JUnit XML for CI, a
progress bar while the run goes.

    html = render_html(result)        # result: the harness's result dict (Report.to_json())
    xml = junit_xml(result)
    details = vector_details(m, X, n_random, Yd, sd, Yr, sr, work, groups)   # per_vector

Invariants:
- Both renderers read nothing but the result dict (a JSON-able dict, as written by
  `mbforge hil --json` or returned by a run database's loader), so a report can be made
  again later from a stored result. Keys they do not find are left out of the report
  (an older result without `per_vector` gives tables and no figures), never an error.
- The JUnit XML parses whatever strings the device sent (its firmware string): characters
  XML 1.0 cannot hold are written as \\xNN.
- The HTML has no external assets: figures are PNG embedded as base64 data URIs, the
  style sheet is inline. Every <img> carries the class "figure".
- The vectors of a run are the random ones first, then the manifest's motion vectors in
  the order of the motion (mbforge.verify.vectors.draw): per_vector["n_random"] splits them.
- Errors per vector and output group are the largest |device - reference| over the
  group's elements (NaN on either side: null in JSON, counted as non-finite), relative
  errors divide by the group's scale (compare.compare_groups).
- Microseconds per call: work / cpu_hz of the board record (mbforge.targets.BOARDS). For
  cycles that is the time; for instructions it is the time at one instruction per cycle
  (a lower bound on a Cortex-M: wait states and multi-cycle instructions add to it).
"""
from __future__ import annotations

import base64
import html
import io
import math
import re
import xml.etree.ElementTree as ET

import numpy as np

from mbforge.reals import REALS

WORST_LISTED = 10
HIST_BINS = 40


# ---- what the harness adds to the result ----------------------------------------------

def _finite_or_none(a) -> list:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(a, dtype=np.float64).tolist()]


def vector_details(m, X, n_random: int, Yd, sd, Yr, sr, work, groups) -> dict:
    """The per-vector part of a result: m the kernel's Manifest, X the inputs as the
    device saw them (real values), Yd/Yr the device's/reference's outputs as float64, sd/sr
    their statuses, work the device's work per call (None: not measured; -1: wrapped),
    groups compare.GroupResult (for the scales and tolerances)."""
    X, Yd, Yr = (np.asarray(a, dtype=np.float64) for a in (X, Yd, Yr))
    n = len(X)
    in_names, out_names = m.flat_names("inputs"), m.flat_names("outputs")
    err = np.abs(Yd - Yr)
    err = np.where(np.isnan(err), np.inf, err)
    per_group, score = {}, np.zeros(n)
    for g, res in zip(m.outputs, groups):
        sl = slice(g.offset, g.offset + g.size)
        e = err[:, sl].max(axis=1, initial=0.0) if g.size else np.zeros(n)
        per_group[g.name] = {"abs_error": _finite_or_none(e), "rel_error": _finite_or_none(e / res.scale)}
        limit = res.tolerance * (res.scale if res.tolerance_kind != "error_bound" else 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.maximum(score, np.where(limit > 0, e / limit, np.where(e > 0, np.inf, 0.0)))
    worst = []
    order = np.argsort(-np.where(np.isfinite(score), score, np.finfo(float).max), kind="stable")
    for k in order[:WORST_LISTED]:
        k = int(k)
        j = int(np.argmax(err[k])) if err.shape[1] else 0
        worst.append({
            "vector": k, "kind": "random" if k < n_random else "motion",
            "motion_index": None if k < n_random else k - n_random,
            "score": float(score[k]) if math.isfinite(score[k]) else None,
            "element": out_names[j] if out_names else None,
            "device": float(Yd[k, j]) if err.shape[1] else None,
            "reference": float(Yr[k, j]) if err.shape[1] else None,
            "abs_error": float(err[k, j]) if err.shape[1] and math.isfinite(err[k, j]) else None,
            "status": int(sd[k]), "reference_status": int(sr[k]),
            "inputs": dict(zip(in_names, X[k].tolist())),
        })
    return {
        "n_random": int(n_random), "n_motion": int(n - n_random),
        "input_names": in_names,
        "status": np.asarray(sd).astype(int).tolist(),
        "reference_status": np.asarray(sr).astype(int).tolist(),
        "work": None if work is None else np.asarray(work).astype(int).tolist(),
        "groups": per_group,
        "worst": worst,
    }


def board_name(firmware: str | None) -> str | None:
    """The board env a firmware string names (e.g. "mbforge-fw 0.1.0 emulated_f405"), if any."""
    from mbforge.targets import BOARDS
    words = (firmware or "").replace(",", " ").split()
    return next((w for w in words if w in BOARDS), None)


def board_clock(result: dict) -> tuple[str | None, int | None]:
    """(board env, cpu Hz) of the result's device, from its record in targets.BOARDS."""
    from mbforge.targets import BOARDS
    dev = result.get("device") or {}
    env = dev.get("board") or dev.get("env") or board_name(dev.get("firmware"))
    b = BOARDS.get(env) if env else None
    return env, (b.cpu_hz if b else None)


# ---- progress ---------------------------------------------------------------------------

def progress_bar(total: int, desc: str = "vectors"):
    """A callable(done) drawing a bar on stderr (mbforge.progress: only on a terminal,
    only after 2 s)."""
    from ..progress import progress_bar as bar

    return bar(total, desc, "vec")


# ---- verdicts shared by the HTML and the JUnit XML ---------------------------------------

def _checks(result: dict) -> list[tuple[str, str, bool, str]]:
    """(test name, class, passed, message) per output group, then the status codes and
    the host-model check."""
    out = []
    for name, g in sorted((result.get("outputs") or {}).items()):
        tol = g.get("tolerance")
        kind = g.get("tolerance_kind", "relative")
        measured = g.get("max_abs_error") if kind == "error_bound" else g.get("max_rel_error")
        msg = (f"output {name}: max {'abs' if kind == 'error_bound' else 'rel'} error {_num(measured)} "
               f"(tolerance {_num(tol)} {kind}), worst {g.get('worst_element')} at vector {g.get('worst_vector')}")
        out.append((f"output {name}", "outputs", bool(g.get("passed")), msg))
    sm = result.get("status_mismatches")
    if sm is not None:
        out.append(("status codes", "status", sm == 0,
                    f"status differs from the reference in {sm} of {result.get('vectors')} vectors"))
    h = result.get("host_model")
    if h is not None:
        ok = h.get("passed", h.get("vectors_mismatched") == 0)
        msg = f"host model: {h.get('vectors_mismatched')} vectors, {h.get('elements_mismatched')} elements differ in bits"
        if h.get("note"):
            msg += (f"; worst relative difference {_num(h.get('max_rel_difference'))} "
                    f"(tolerance {_num(h.get('tolerance'))}). {h['note']}")
        out.append(("host model bit-exact" if not h.get("note") else "host model within tolerance",
                    "host_model", bool(ok), msg))
    return out


def _num(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    try:
        return f"{float(v):.3e}"
    except (TypeError, ValueError):
        return str(v)


# ---- JUnit XML ---------------------------------------------------------------------------

# what XML 1.0 cannot hold, even escaped (a device's firmware string may carry any byte)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(v) -> str:
    """str(v) with every character XML cannot hold shown as \\xNN (the report still parses)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(v))


def junit_xml(result: dict) -> str:
    """One <testsuite> (the kernel) of one <testcase> per output group, one for the status
    codes and one for the host model (when run); a failed check carries <failure message>."""
    checks = [(_xml(name), _xml(cls), ok, _xml(msg)) for name, cls, ok, msg in _checks(result)]
    kernel = _xml(result.get("kernel", "kernel"))
    secs = (result.get("seconds") or {}).get("total") or 0.0
    fails = sum(1 for c in checks if not c[2])
    suites = ET.Element("testsuites", name="mbforge hil", tests=str(len(checks)), failures=str(fails),
                        errors="0", time=f"{secs:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=f"hil.{kernel}", tests=str(len(checks)),
                          failures=str(fails), errors="0", skipped="0", time=f"{secs:.3f}")
    props = ET.SubElement(suite, "properties")
    dev = result.get("device") or {}
    for k in ("firmware", "url", "real", "counter", "board"):
        if dev.get(k) is not None:
            ET.SubElement(props, "property", name=f"device.{k}", value=_xml(dev[k]))
    ET.SubElement(props, "property", name="vectors", value=str(result.get("vectors")))
    for name, cls, ok, msg in checks:
        case = ET.SubElement(suite, "testcase", name=name, classname=f"hil.{kernel}.{cls}", time="0")
        if ok:
            ET.SubElement(case, "system-out").text = msg
        else:
            f = ET.SubElement(case, "failure", message=msg, type="HILMismatch")
            f.text = msg
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ---- figures -----------------------------------------------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(b64: str, alt: str) -> str:
    return f'<img class="figure" alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _arr(v) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in v], dtype=np.float64)


def _figures(result: dict) -> list[tuple[str, str]]:
    """(title, <img>) per figure; none without per-vector data."""
    pv = result.get("per_vector")
    if not pv or not pv.get("groups"):
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nr = int(pv.get("n_random", 0))
    groups = list(pv["groups"].items())
    figs = [("Error histograms per output group",
             _img(_png(_histograms(plt, groups, nr, result.get("outputs") or {})), "error histograms"))]
    nm = int(pv.get("n_motion", 0))
    if nm:
        figs.append(("Error along the motion", _img(_png(_motion_errors(plt, groups, nr, nm)), "error along the motion")))
    work = pv.get("work")
    if work:
        unit = (result.get("work_per_call") or {}).get("unit", "work")
        figs.append(("Work per vector", _img(_png(_work_per_vector(plt, work, nr, unit)), "work per vector")))
    return figs


def _histograms(plt, groups: list, nr: int, outs: dict):
    """Histograms of log10 relative error per group, random and motion vectors stacked."""
    cols = min(3, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, (name, g) in zip(axes.flat, groups):
        _histogram(ax, name, _arr(g["rel_error"]), nr, outs.get(name) or {})
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _histogram(ax, name: str, rel, nr: int, out: dict) -> None:
    """One group's histogram, with its relative tolerance as a dashed line."""
    fin = np.isfinite(rel) & (rel > 0)  # exact (0) and non-finite ones are counted in the title
    lg = np.log10(rel[fin])
    kinds = np.arange(len(rel))[fin] < nr
    data = [lg[kinds], lg[~kinds]]
    lo, hi = (float(lg.min()), float(lg.max())) if lg.size else (-20.0, 0.0)
    tol = out.get("tolerance")
    rel_tol = tol if out.get("tolerance_kind", "relative") == "relative" else None
    if rel_tol:
        lo, hi = min(lo, math.log10(rel_tol)), max(hi, math.log10(rel_tol))
    bins = np.linspace(lo - 0.5, hi + 0.5, HIST_BINS)
    ax.hist(data, bins=bins, stacked=True, label=["random", "motion"], color=["#4c78a8", "#f58518"])
    if rel_tol:
        ax.axvline(math.log10(rel_tol), color="#d62728", ls="--", label="tolerance")
    nonfin, exact = int(np.count_nonzero(~np.isfinite(rel))), int(np.count_nonzero(rel == 0))
    extra = [f"{exact} exact"] * bool(exact) + [f"{nonfin} non-finite"] * bool(nonfin)
    ax.set_title(name + (f" ({', '.join(extra)})" if extra else ""), fontsize=10)
    ax.set_xlabel("log10 relative error")
    ax.set_ylabel("vectors")
    ax.legend(fontsize=7)


def _motion_errors(plt, groups: list, nr: int, nm: int):
    """Relative error of each group along the motion vectors."""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for name, g in groups:
        rel = _arr(g["rel_error"])[nr:]
        exact = int(np.count_nonzero(rel == 0))
        ax.semilogy(np.arange(nm), np.where(rel > 0, rel, np.nan), lw=1, marker="." if nm < 200 else None,
                    label=name + (f" ({exact} exact: gaps)" if exact else ""))
    ax.set_xlabel("motion vector (in the order of the motion)")
    ax.set_ylabel("relative error")
    ax.legend(fontsize=7, ncol=min(4, len(groups)))
    ax.grid(alpha=0.3)
    return fig


def _work_per_vector(plt, work: list, nr: int, unit: str):
    """Work per call of each vector; negative (unmeasured) ones are left out."""
    w = np.array(work, dtype=np.float64)
    w[w < 0] = np.nan
    fig, ax = plt.subplots(figsize=(9, 2.8))
    idx = np.arange(len(w))
    ax.plot(idx[:nr], w[:nr], ".", ms=2, label="random", color="#4c78a8")
    ax.plot(idx[nr:], w[nr:], ".", ms=2, label="motion", color="#f58518")
    ax.set_xlabel("vector")
    ax.set_ylabel(unit)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


# ---- HTML --------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.2em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}
th{background:#f0f0f0}td.l,th.l{text-align:left}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:6px 10px;margin:.5em 0}
img.figure{display:block;margin:.5em 0;max-width:100%}
code{font-size:12px}
"""


def _full(v, digits: int = 9) -> str:
    """Enough digits to tell the device's value from the reference's (9: float, 17: double)."""
    return "n/a" if v is None else f"{float(v):.{digits}g}"


def _table(head: list[str], rows: list[list], left: int = 1, left_cols: tuple = ()) -> str:
    def cls(i: int) -> str:
        return "l" if i < left or i in left_cols else ""
    h = "".join(f'<th class="{cls(i)}">{html.escape(str(c))}</th>' for i, c in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{cls(i)}">{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _verdict(ok: bool) -> str:
    return '<span class="pass">PASS</span>' if ok else '<span class="fail">FAIL</span>'


def _split_table(result: dict) -> str:
    pv = result.get("per_vector") or {}
    nr, nm = int(pv.get("n_random", 0)), int(pv.get("n_motion", 0))
    rows = []
    for name, g in (pv.get("groups") or {}).items():
        rel = _arr(g["rel_error"])
        cells = [html.escape(name)]
        for part in (rel[:nr], rel[nr:]):
            if part.size == 0:
                cells += ["-", "-"]
                continue
            fin = part[np.isfinite(part)]
            nonfin = part.size - fin.size
            cells += [_num(float(fin.max()) if fin.size else None) + (f" (+{nonfin} non-finite)" if nonfin else ""),
                      _num(float(np.median(fin)) if fin.size else None)]
        rows.append(cells)
    if not rows:
        return ""
    return (f"<h2>Random vs motion vectors</h2><p>{nr} random vectors within the domain, "
            f"{nm} motion vectors.</p>"
            + _table(["output", "random: max rel", "random: median rel", "motion: max rel", "motion: median rel"], rows))


def _worst_table(result: dict) -> str:
    pv = result.get("per_vector") or {}
    worst = pv.get("worst") or []
    if not worst:
        return ""
    r = REALS.get((result.get("device") or {}).get("real"))  # the HELLO's kind; unknown: as float
    digits = r.digits if r else REALS["float"].digits
    rows = []
    for w in worst:
        where = "random" if w["kind"] == "random" else f"motion #{w['motion_index']}"
        inputs = ", ".join(f"{html.escape(k)}={v:.6g}" for k, v in (w.get("inputs") or {}).items())
        rows.append([str(w["vector"]), where, html.escape(str(w.get("element"))), _full(w.get("device"), digits),
                     _full(w.get("reference"), digits), _num(w.get("abs_error")), _num(w.get("score")),
                     f'{w.get("status")}/{w.get("reference_status")}', f'<code>{inputs}</code>'])
    return ("<h2>Worst vectors</h2><p>Ranked by error / tolerance (score &gt; 1 fails); status is "
            "device/reference.</p>"
            + _table(["vector", "kind", "worst element", "device", "reference", "abs error", "score", "status",
                      "inputs"], rows, left=0, left_cols=(8,)))


def _work_table(result: dict) -> str:
    w = result.get("work_per_call")
    if not w:
        return ""
    env, hz = board_clock(result)
    unit = w.get("unit", "none")
    rows = []
    for k in ("min", "median", "max"):
        v = w.get(k)
        us = f"{v / hz * 1e6:.3f}" if (hz and isinstance(v, (int, float)) and unit in ("instructions", "cycles")) else "-"
        rows.append([k, _num(v) if not isinstance(v, (int, float)) else f"{v:g}", us])
    note = (f"board {html.escape(env)} at {hz / 1e6:g} MHz (targets.BOARDS); "
            + ("µs = cycles / clock." if unit == "cycles" else
               "µs = instructions / clock, the time at one instruction per cycle (a lower bound: "
               "wait states and multi-cycle instructions add to it).")) if hz else \
        "the board is unknown (the device names none), so no microseconds are given."
    extra = []
    if w.get("ticks_per_unit"):
        extra.append(f"{w['ticks_per_unit']:.4f} counter ticks per {unit[:-1] if unit.endswith('s') else unit}")
    if w.get("counter_overflows"):
        extra.append(f"{w['counter_overflows']} calls overflowed the counter and are left out")
    secs = result.get("seconds") or {}
    if secs.get("eval") and result.get("vectors"):
        extra.append(f"link time per vector {secs['eval'] / result['vectors'] * 1e3:.2f} ms "
                     f"({_num(secs.get('vectors_per_second'))} vectors/s)")
    return (f"<h2>Work per call</h2><p>{note}</p>" + _table([f"{unit}", "", "µs"], [[r[0], r[1], r[2]] for r in rows])
            + "".join(f"<p>{html.escape(e)}</p>" for e in extra))


def _link_table(result: dict) -> str:
    link = result.get("link")
    if not link:
        return ""
    rows = [[html.escape(str(k)), html.escape(str(v))] for k, v in sorted(link.items())]
    return "<h2>Link statistics</h2>" + _table(["counter", "value"], rows)


def render_html(result: dict, *, title: str | None = None) -> str:
    """The whole report as one HTML document (no external assets)."""
    kernel = str(result.get("kernel", "kernel"))
    dev = result.get("device") or {}
    title = title or f"mbforge HIL: {kernel}"
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)} {_verdict(bool(result.get('passed')))}</h1>"]
    env, _ = board_clock(result)
    facts = [("device", dev.get("firmware")), ("board", env), ("at", dev.get("url")), ("real", dev.get("real")),
             ("counter", dev.get("counter")), ("vectors", result.get("vectors")),
             ("total seconds", _num((result.get("seconds") or {}).get("total")))]
    parts.append("<p>" + " · ".join(f"{k}: <b>{html.escape(str(v))}</b>" for k, v in facts if v is not None) + "</p>")
    checks = _checks(result)
    parts.append("<h2>Checks</h2>" + _table(["check", "verdict", "detail"],
                                            [[html.escape(n), _verdict(ok), html.escape(msg)] for n, _, ok, msg in checks],
                                            left=3))
    h = result.get("host_model") or {}
    if h.get("note"):
        parts.append(f'<div class="note">{html.escape(h["note"])}</div>')
    outs = result.get("outputs") or {}
    if outs:
        rows = [[html.escape(n), _num(g.get("max_abs_error")), _num(g.get("max_rel_error")), _num(g.get("scale")),
                 _num(g.get("tolerance")) + ("*" if g.get("tolerance_kind") == "error_bound" else ""),
                 html.escape(f"{g.get('worst_element')} ({g.get('worst_vector')})"), _verdict(bool(g.get("passed")))]
                for n, g in outs.items()]
        parts.append("<h2>Outputs</h2>" + _table(["output", "max abs err", "max rel err", "scale", "tolerance",
                                                  "worst (vector)", ""], rows))
        if any(g.get("tolerance_kind") == "error_bound" for g in outs.values()):
            parts.append("<p>* the manifest's per-element absolute error bound (largest shown)</p>")
    for t, img in _figures(result):
        parts.append(f"<h2>{html.escape(t)}</h2>{img}")
    if not result.get("per_vector"):
        parts.append("<p>This result holds no per-vector data: no figures.</p>")
    parts += [_split_table(result), _worst_table(result), _work_table(result), _link_table(result)]
    parts.append("</body></html>\n")
    return "".join(p for p in parts if p)


# ---- a device's run of a step kernel over a horizon (`mbforge simulate --device`) ---------

TRAJECTORY_PANELS = 6  # coordinates plotted (the first ones): the CSV has them all


def _simulation_figures(t, names, Q, Qref, Qdbl) -> list[tuple[str, str]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = min(TRAJECTORY_PANELS, len(names))
    cols = min(3, k)
    rows = math.ceil(k / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    for j, ax in zip(range(k), axes.flat):
        ax.plot(t, Qref[:, j], color="#4c78a8", lw=2.2, alpha=0.6, label="host reference")
        ax.plot(t, Q[:, j], color="#f58518", lw=1, label="device")
        ax.set_title(f"q.{names[j]}", fontsize=10)
        ax.set_xlabel("t [s]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[k:]:
        ax.axis("off")
    fig.tight_layout()
    figs = [("Trajectories: device and host reference", _img(_png(fig), "trajectories"))]
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for label, A, B in (("device - reference", Q, Qref), ("double step - reference", Qdbl, Qref),
                        ("device - double step", Q, Qdbl)):
        e = np.abs(A - B).max(axis=1)
        ax.semilogy(t, np.where(e > 0, e, np.nan), lw=1, label=label)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("max |q difference|")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figs.append(("Divergence of the positions over the horizon", _img(_png(fig), "divergence")))
    return figs


def render_simulation(result: dict, t, names, Q, Qref, Qdbl) -> str:
    """The HTML report of a device's run over a horizon: its facts, timing and divergence
    tables from `result`, figures from the sampled positions (device, reference, double step)."""
    title = f"mbforge simulate --device: {result.get('model')} on {result.get('board')}"
    ok = result.get("status") == 0
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(title)} {_verdict(ok)}</h1>"]
    st = result.get("step") or {}
    facts = [("kernel", result.get("kernel")), ("target", result.get("target")), ("integrator", st.get("integrator")),
             ("dt", result.get("dt")), ("iterations", st.get("iterations")), ("steps", result.get("steps")),
             ("samples", result.get("samples")), ("status", result.get("status_text"))]
    parts.append("<p>" + " · ".join(f"{k}: <b>{html.escape(str(v))}</b>" for k, v in facts if v is not None) + "</p>")
    tm = result.get("timing") or {}
    parts.append("<h2>Timing</h2>" + _table(["measure", "value"], [[html.escape(k), _num(v) if not isinstance(v, str)
                                                                   else html.escape(v)] for k, v in sorted(tm.items())]))
    rows = []
    for ref, d in sorted((result.get("divergence") or {}).items()):
        for k, v in sorted(d.items()):
            rows.append([html.escape(ref), html.escape(k), html.escape(v) if isinstance(v, str) else _num(v)])
    for k in ("constraint_residual_max", "velocity_residual_max", "energy_drift_max_abs", "energy_drift_of_max_T"):
        rows.append(["checks", k, _num(result.get(k))])
    parts.append("<h2>Divergence and checks</h2>" + _table(["against", "measure", "value"], rows, left=3))
    for title_, img in _simulation_figures(np.asarray(t), names, np.asarray(Q), np.asarray(Qref), np.asarray(Qdbl)):
        parts.append(f"<h2>{html.escape(title_)}</h2>{img}")
    parts.append("</body></html>\n")
    return "".join(parts)
