"""A TCP proxy between the HIL harness and QEMU's serial socket that damages the stream.

    with FaultProxy(emu.port, flip={"h2d": [5000], "d2h": [20000]},
                    drop_frames={"d2h": [40]}, stall={"d2h": {60: 0.5}}) as proxy:
        run(proxy.url, ...)

Directions: "h2d" host to device, "d2h" device to host. Faults, each at a fixed place
of one direction's byte stream so a test is reproducible:
  flip         byte offsets whose byte is XORed with 0x5A
  drop_bytes   byte offsets whose byte is not forwarded
  drop_frames  numbers (1 = the first) of non-empty frames dropped whole (bytes between
               two 0x00 delimiters; the delimiters still pass)
  stall        {frame number: seconds}: hold that frame back this long before sending it
  flip_rate    {direction: p}: each byte is flipped with probability p (XOR 0x5A), at
               places drawn from random.Random(f"{seed} {direction}"): the same each run
`done[dir]` lists what was applied; `seen[dir]` counts bytes; `when_seen(dir, n)`
returns an Event set once n bytes went that way (to time a reset). The proxy accepts
one client at a time, again after a disconnection; when either side closes, so does
the other (the harness sees the device go away, as with a pulled cable).
"""
from __future__ import annotations

import math
import random
import socket
import threading
import time
from contextlib import contextmanager


class FaultProxy:
    def __init__(self, upstream_port: int, *, flip=None, drop_bytes=None, drop_frames=None, stall=None,
                 flip_rate=None, seed: int = 0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.flip = {d: set((flip or {}).get(d, ())) for d in ("h2d", "d2h")}
        self.flip_rate = {d: (flip_rate or {}).get(d, 0.0) for d in ("h2d", "d2h")}
        self._rng = {d: random.Random(f"{seed} {d}") for d in ("h2d", "d2h")}
        self._next_flip = {d: self._gap(d) - 1 for d in ("h2d", "d2h")}
        self.drop_bytes = {d: set((drop_bytes or {}).get(d, ())) for d in ("h2d", "d2h")}
        self.drop_frames = {d: set((drop_frames or {}).get(d, ())) for d in ("h2d", "d2h")}
        self.stall = {d: dict((stall or {}).get(d, {})) for d in ("h2d", "d2h")}
        self.seen = {"h2d": 0, "d2h": 0}
        self.frames = {"h2d": 0, "d2h": 0}
        self.done = {"h2d": [], "d2h": []}
        self._events: list[tuple[str, int, threading.Event]] = []
        self._srv = socket.socket()
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(1)
        self.port = self._srv.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def _gap(self, d: str) -> float:
        """Bytes to the next random flip: geometric with the direction's rate."""
        p = self.flip_rate[d]
        if p <= 0:
            return math.inf
        return 1 + int(math.log(1.0 - self._rng[d].random()) / math.log1p(-p))

    def when_seen(self, direction: str, n: int) -> threading.Event:
        ev = threading.Event()
        self._events.append((direction, n, ev))
        return ev

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._srv.close()
        self._thread.join(5)

    def _serve(self) -> None:
        self._srv.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(0.1)
            t = [threading.Thread(target=self._pump, args=(client, up, "h2d"), daemon=True),
                 threading.Thread(target=self._pump, args=(up, client, "d2h"), daemon=True)]
            for th in t:
                th.start()
            for th in t:
                th.join()
            client.close()
            up.close()

    def _pump(self, src: socket.socket, dst: socket.socket, d: str) -> None:
        frame = bytearray()
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                out = bytearray()
                for b in data:
                    off = self.seen[d]
                    self.seen[d] += 1
                    if off in self.drop_bytes[d]:
                        self.done[d].append(("drop_byte", off))
                        continue
                    if off in self.flip[d] or off == self._next_flip[d]:
                        self.done[d].append(("flip", off))
                        b ^= 0x5A
                    if off == self._next_flip[d]:
                        self._next_flip[d] += self._gap(d)
                    if b != 0:
                        frame.append(b)
                        continue
                    if frame:
                        self.frames[d] += 1
                        k = self.frames[d]
                        if k in self.stall[d]:
                            dst.sendall(bytes(out))
                            out.clear()
                            self.done[d].append(("stall", k))
                            time.sleep(self.stall[d][k])
                        if k in self.drop_frames[d]:
                            self.done[d].append(("drop_frame", k))
                        else:
                            out += frame
                        frame.clear()
                    out.append(0)
                if out:
                    dst.sendall(bytes(out))
                for direction, n, ev in self._events:
                    if direction == d and self.seen[d] >= n:
                        ev.set()
        except OSError:
            pass
        finally:  # one side went away: so does the other
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@contextmanager
def reset_when_seen(emu, proxy: FaultProxy, direction: str, n: int, wait: float = 60.0):
    """A system_reset of the emulated board from a thread once n bytes went `direction`
    through the proxy (joined when the block ends)."""
    seen = proxy.when_seen(direction, n)

    def reset():
        if seen.wait(wait):
            emu.monitor_command("system_reset")
    t = threading.Thread(target=reset, daemon=True)
    t.start()
    try:
        yield
    finally:
        t.join(5)
