"""cocotb bench for a kernel with the ap_ctrl_hs block protocol (mbforge's RTL or the RTL
Vitis HLS makes from the HLS-ready C: the same ports).

The job file named by $MBF_JOB (written by mbforge.hdl.sim) holds the raw int32 input
vectors, the port names, what to do and, unless the RTL is only run (sim.RtlDevice),
the c-fixed host model's outputs and statuses for them. Cycles are counted at falling
edges: the bench drives after a rising edge and samples in the middle of the cycle, so
a handshake (ap_start & ap_ready) or a result (ap_done) seen at a sample takes effect
at the next rising edge.

Tests:
* test_vectors: every vector through the kernel, in order, with the producer pausing
  (ap_start low) on a random share of the cycles in the second half; results must
  equal the host model's bit for bit (outputs and ap_return; mbforge.verify.compare's
  bit_exact), when the job has them. Each output is taken in the cycle its out_<k>_ap_vld
  is high (all with ap_done, or earlier in a pipelined kernel with early outputs). Measured: latency per vector (first cycle ap_start
  is high for a vector -> its ap_done cycle), interval (cycles between accepts while
  ap_start stays high) and the whole run's cycles per vector.
* test_reset_midway: vectors in flight, ap_rst for two cycles: no ap_done and no
  out_<k>_ap_vld may follow, the kernel is idle, and the next vector computes correctly.
* test_horizon (step kernels, job["horizon"]): a motion, each step's state outputs fed back
  as the next step's inputs (what a design that integrates in the fabric does): from x0,
  `steps` steps, one at a time (a step needs the one before), the state after every
  `every`-th step recorded with each step's latency; stops at the first non-zero
  ap_return. Compared with the host model's run by mbforge.hdl.sim.horizon.
Results go to the job's `results` file (JSON), merged over tests.
"""
from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from mbforge.verify.compare import bit_exact

MASK = 0xFFFFFFFF


def _job() -> dict:
    with open(os.environ["MBF_JOB"]) as f:
        return json.load(f)


def _save(job: dict, key: str, value) -> None:
    path = job["results"]
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data[key] = value
    with open(path, "w") as f:
        json.dump(data, f)


class Driver:
    def __init__(self, dut, job):
        self.dut = dut
        self.ins = [getattr(dut, n) for n in job["inputs"]]
        self.names = list(job["outputs"])
        self.outs = [getattr(dut, n) for n in job["outputs"]]
        # each output is taken when its own _ap_vld is high (a pipelined kernel may give
        # an output before the others: Vitis HLS's ap_vld meaning); without one, at ap_done
        self.vlds = [getattr(dut, f"{n}_ap_vld", None) for n in job["outputs"]]
        self.has_return = hasattr(dut, "ap_return")
        self.cycle = 0
        self.early: list[list[int]] = [[] for _ in self.outs]

    async def start(self):
        d = self.dut
        Clock(d.ap_clk, 10, unit="ns").start()
        d.ap_start.value = 0
        d.ap_rst.value = 1
        for h in self.ins:
            h.value = 0
        for _ in range(3):
            await RisingEdge(d.ap_clk)
        d.ap_rst.value = 0
        await RisingEdge(d.ap_clk)

    def drive(self, x):
        for h, v in zip(self.ins, x):
            h.value = int(v) & MASK

    def sample(self) -> int:
        """Take every output whose _ap_vld is high; the number taken."""
        k = 0
        for q, h, v in zip(self.early, self.outs, self.vlds):
            if v is not None and v.value == 1:
                q.append(h.value.to_signed())
                k += 1
        return k

    def read(self):
        """At ap_done: the oldest value taken of each output (FIFO order = vector order)."""
        y = []
        for q, h, v, name in zip(self.early, self.outs, self.vlds, self.names):
            if v is None:
                y.append(h.value.to_signed())
            elif q:
                y.append(q.pop(0))
            else:
                raise AssertionError(f"ap_done without a valid {name} for this vector")
        st = self.dut.ap_return.value.to_signed() if self.has_return else 0
        return y, st

    async def run(self, X, gap=0.0, rng=None, max_cycles=10_000_000):
        """Stream X through the kernel; returns (outputs, statuses, start, accept, done cycles)."""
        d = self.dut
        rng = rng or random.Random(0)
        n = len(X)
        outs, stats, starts, accepts, dones = [], [], [], [], []
        nxt = 0
        current = None
        budget = max_cycles
        while len(outs) < n:
            budget -= 1
            if budget < 0:
                raise AssertionError(f"timeout: {len(outs)} of {n} results after {max_cycles} cycles")
            if current is None and nxt < n and not (gap and rng.random() < gap):
                current = nxt
                nxt += 1
                self.drive(X[current])
                d.ap_start.value = 1
                starts.append(self.cycle)
            elif current is None:
                d.ap_start.value = 0
            await FallingEdge(d.ap_clk)
            if current is not None and d.ap_ready.value == 1:
                accepts.append(self.cycle)
                current = None
            self.sample()
            if d.ap_done.value == 1:
                y, st = self.read()
                outs.append(y)
                stats.append(st)
                dones.append(self.cycle)
            await RisingEdge(d.ap_clk)
            self.cycle += 1
        d.ap_start.value = 0
        return outs, stats, starts, accepts, dones


def _compare(job, outs, stats, idx):
    """Mismatch messages of results for job vectors idx against the host model's."""
    if "Y" not in job:
        return []
    return bit_exact([list(y) for y in outs], stats, [job["Y"][k] for k in idx], [job["status"][k] for k in idx],
                     job["outputs"], status_name="ap_return", rows=idx).mismatches


@cocotb.test()
async def test_vectors(dut):
    job = _job()
    drv = Driver(dut, job)
    await drv.start()
    X = job["X"]
    half = len(X) // 2
    rng = random.Random(job.get("seed", 0))
    o1, s1, st1, ac1, dn1 = await drv.run(X[:half], gap=0.0, rng=rng)
    for _ in range(3):
        await RisingEdge(dut.ap_clk)
        drv.cycle += 1
    o2, s2, st2, ac2, dn2 = await drv.run(X[half:], gap=job.get("gap", 0.3), rng=rng)
    outs, stats = o1 + o2, s1 + s2
    bad = _compare(job, outs, stats, list(range(len(X))))
    lat = [d - s for d, s in zip(dn1 + dn2, st1 + st2)]
    intervals = [b - a for a, b in zip(ac1, ac1[1:])]
    res = {
        "vectors": len(X), "mismatches": bad, "bit_exact": not bad,
        "latency_first": lat[0] if lat else None,
        "latency_min": min(lat) if lat else None, "latency_max": max(lat) if lat else None,
        "latencies": lat,
        "interval_min": min(intervals) if intervals else None,
        "interval_max": max(intervals) if intervals else None,
        # ap_start held high: cycles between the first and the last result, per result
        "back_to_back_cycles": (dn1[-1] - dn1[0]) if len(dn1) > 1 else None, "back_to_back_vectors": len(o1) - 1,
        "outputs": outs, "status": stats,
    }
    _save(job, "test_vectors", res)
    assert not bad, "\n".join(bad)


@cocotb.test()
async def test_reset_midway(dut):
    job = _job()
    drv = Driver(dut, job)
    await drv.start()
    d = dut
    X = job["X"]
    lat = int(job.get("latency") or 8)
    assert d.ap_idle.value == 1, "not idle after reset"
    # start vectors, then reset in the middle of the computation
    k = 0
    for c in range(max(1, lat // 2)):
        d.ap_start.value = 1
        drv.drive(X[k % len(X)])
        await FallingEdge(d.ap_clk)
        if d.ap_ready.value == 1:
            k += 1
        assert d.ap_done.value == 0 or c >= lat, "ap_done before the latency"
        await RisingEdge(d.ap_clk)
    d.ap_start.value = 0
    d.ap_rst.value = 1
    await RisingEdge(d.ap_clk)
    await RisingEdge(d.ap_clk)
    d.ap_rst.value = 0
    stray = 0
    for _ in range(lat + 5):
        await FallingEdge(d.ap_clk)
        stray += int(d.ap_done.value == 1) + drv.sample()
        assert d.ap_idle.value == 1, "not idle after a reset with nothing started"
        await RisingEdge(d.ap_clk)
    assert stray == 0, f"{stray} ap_done pulses after the reset"
    # the kernel computes correctly afterwards
    idx = [1 % len(X), 0]
    outs, stats, *_ = await drv.run([X[i] for i in idx])
    bad = _compare(job, outs, stats, idx)
    _save(job, "test_reset_midway", {"started_before_reset": k, "stray_done": stray, "mismatches": bad})
    assert not bad, "\n".join(bad)


@cocotb.test()
async def test_horizon(dut):
    job = _job()
    h = job.get("horizon")
    if h is None:  # not a step kernel's job
        return
    drv = Driver(dut, job)
    await drv.start()
    x = list(h["x0"])
    ns, every = h["n_state"], h["every"]
    samples, latencies, failed, status = [], [], None, 0
    for i in range(h["steps"]):
        outs, stats, starts, _, dones = await drv.run([x])
        latencies.append(dones[0] - starts[0])
        if stats[0] != 0:
            failed, status = i, stats[0]
            break
        x[:ns] = outs[0][:ns]
        if (i + 1) % every == 0:
            samples.append(x[:ns])
    _save(job, "test_horizon", {"samples": samples, "latencies": latencies, "failed_step": failed,
                                "status": status})


@cocotb.test()
async def test_axis(dut):
    """The AXI-Stream wrapper (mbforge.hdl.axis): every vector as beats on s_axis, tvalid
    dropped on a random share `gap` of the cycles between beats, m_axis_tready low on as
    many; the beats on m_axis (outputs, then the status word, tlast on it) against the host
    model bit for bit."""
    job = _job()
    if not hasattr(dut, "s_axis_tdata"):  # a bare core's job
        return
    d = dut
    X, n_out, gap = job["X"], len(job["outputs"]), job.get("gap", 0.3)
    rng = random.Random(job.get("seed", 0))
    Clock(d.aclk, 10, unit="ns").start()
    d.aresetn.value, d.s_axis_tvalid.value, d.m_axis_tready.value = 0, 0, 0
    for _ in range(3):
        await RisingEdge(d.aclk)
    d.aresetn.value = 1
    beats = [(int(v) & MASK, j == len(x) - 1) for x in X for j, v in enumerate(x)]
    got, lasts, sent, cycles, gaps, stalls = [], [], 0, 0, 0, 0
    want = len(X) * (n_out + 1)
    while len(got) < want:
        cycles += 1
        if cycles > 2000 * want + 1000:
            raise AssertionError(f"timeout: {len(got)} of {want} output beats after {cycles} cycles")
        if d.s_axis_tvalid.value == 0 and sent < len(beats):  # a beat offered stays until taken
            if rng.random() < gap:
                gaps += 1
            else:
                d.s_axis_tdata.value, d.s_axis_tlast.value = beats[sent][0], int(beats[sent][1])
                d.s_axis_tvalid.value = 1
        ready = rng.random() >= gap
        stalls += not ready
        d.m_axis_tready.value = int(ready)
        await FallingEdge(d.aclk)
        if d.s_axis_tvalid.value == 1 and d.s_axis_tready.value == 1:
            sent += 1
            took = True
        else:
            took = False
        if d.m_axis_tvalid.value == 1 and ready:
            got.append(d.m_axis_tdata.value.to_signed())
            lasts.append(int(d.m_axis_tlast.value))
        await RisingEdge(d.aclk)
        if took:
            d.s_axis_tvalid.value = 0
    rows = [got[k * (n_out + 1):(k + 1) * (n_out + 1)] for k in range(len(X))]
    bad = _compare(job, [r[:n_out] for r in rows], [r[n_out] for r in rows], list(range(len(X))))
    wrong_last = [k for k, v in enumerate(lasts) if v != int(k % (n_out + 1) == n_out)]
    bad += [f"m_axis_tlast wrong on beat {k}" for k in wrong_last[:5]]
    _save(job, "test_axis", {"vectors": len(X), "mismatches": bad, "cycles_per_vector": cycles / max(1, len(X)),
                             "tvalid_gaps": gaps, "tready_stalls": stalls})
    assert not bad, "\n".join(bad)


class AxiLite:
    """An AXI4-Lite manager on the `<top>_axil` wrapper's s_axil_* ports: each valid raised
    after a random number of cycles, each ready held low on a random share `gap` of them."""

    def __init__(self, dut, rng, gap):
        self.d, self.rng, self.gap = dut, rng, gap
        self.valid_delays = self.ready_delays = self.cycles = 0

    def _delay(self) -> int:
        k = 0
        while self.rng.random() < self.gap:
            k += 1
        self.valid_delays += k
        return k

    async def _offer(self, channels):
        """Raise each (valid, ready, delay) channel's valid after its delay until its ready
        (sampled at the falling edge, effective at the next rising one); then drop it."""
        d, t, left = self.d, 0, list(channels)
        while left:
            for valid, _, delay in left:
                valid.value = int(t >= delay)
            await FallingEdge(d.aclk)
            fired = [c for c in left if c[0].value == 1 and c[1].value == 1]
            await RisingEdge(d.aclk)
            for c in fired:
                c[0].value = 0
                left.remove(c)
            t += 1
            self.cycles += 1

    async def _response(self, valid, ready):
        """Take one response with ready low on a random share of the cycles; its data and resp."""
        d = self.d
        while True:
            r = self.rng.random() >= self.gap
            self.ready_delays += not r
            ready.value = int(r)
            await FallingEdge(d.aclk)
            fired = r and valid.value == 1
            data = d.s_axil_rdata.value.to_signed() if fired and valid is d.s_axil_rvalid else None
            resp = int((d.s_axil_rresp if valid is d.s_axil_rvalid else d.s_axil_bresp).value) if fired else None
            await RisingEdge(d.aclk)
            self.cycles += 1
            if fired:
                ready.value = 0
                return data, resp

    async def write(self, addr: int, value: int):
        d = self.d
        d.s_axil_awaddr.value, d.s_axil_wdata.value, d.s_axil_wstrb.value = addr, int(value) & MASK, 0xF
        await self._offer([(d.s_axil_awvalid, d.s_axil_awready, self._delay()),
                           (d.s_axil_wvalid, d.s_axil_wready, self._delay())])
        _, resp = await self._response(d.s_axil_bvalid, d.s_axil_bready)
        assert resp == 0, f"write of 0x{addr:02x}: bresp {resp}"

    async def read(self, addr: int) -> int:
        d = self.d
        d.s_axil_araddr.value = addr
        await self._offer([(d.s_axil_arvalid, d.s_axil_arready, self._delay())])
        data, resp = await self._response(d.s_axil_rvalid, d.s_axil_rready)
        assert resp == 0, f"read of 0x{addr:02x}: rresp {resp}"
        return data


@cocotb.test()
async def test_axilite(dut):
    """The AXI4-Lite wrapper (mbforge.hdl.axilite): per vector the inputs written, CTRL's
    start bit set, CTRL polled until done, the outputs and STATUS read, every channel with
    random valid and ready delays; the results against the host model bit for bit."""
    job = _job()
    if not hasattr(dut, "s_axil_awaddr"):  # not the wrapper's job
        return
    d = dut
    X, n_in, n_out = job["X"], len(job["inputs"]), len(job["outputs"])
    Clock(d.aclk, 10, unit="ns").start()
    d.aresetn.value = 0
    for s in (d.s_axil_awvalid, d.s_axil_wvalid, d.s_axil_bready, d.s_axil_arvalid, d.s_axil_rready):
        s.value = 0
    for _ in range(3):
        await RisingEdge(d.aclk)
    d.aresetn.value = 1
    await RisingEdge(d.aclk)
    m = AxiLite(d, random.Random(job.get("seed", 0)), job.get("gap", 0.3))
    bad = []
    ctrl = await m.read(0x00)
    if ctrl != 0b100:
        bad.append(f"CTRL after reset: {ctrl:#x}, not idle (0x4)")
    outs, stats, t0 = [], [], m.cycles
    for x in X:
        for k, v in enumerate(x):
            await m.write(0x10 + 4 * k, v)
        await m.write(0x00, 1)
        polls = 0
        while not (ctrl := await m.read(0x00)) & 0b10:
            polls += 1
            if polls > 100_000:
                raise AssertionError("timeout: CTRL's done bit never set")
        if ctrl & 1:
            bad.append(f"CTRL {ctrl:#x}: start still set with done")
        outs.append([await m.read(0x10 + 4 * (n_in + k)) for k in range(n_out)])
        stats.append(await m.read(0x04))
    bad += _compare(job, outs, stats, list(range(len(X))))
    cycles = m.cycles - t0
    _save(job, "test_axilite", {"vectors": len(X), "mismatches": bad, "cycles_per_vector": cycles / max(1, len(X)),
                                "valid_delays": m.valid_delays, "ready_delays": m.ready_delays})
    assert not bad, "\n".join(bad)
