"""`mbforge simulate --device`: a step kernel run over a horizon on the emulated board (SIM
requests, mbforge.hil.simulate), checked against the host; and the SIM payload's sizes."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbforge.hil import protocol as P
from mbforge.hil.link import LinkError
from mbforge.hil.simulate import decode_sim, sim_payload, ulp_distance

MBFORGE = Path(sys.executable).parent / "mbforge"
FW = "mbforge-fw test"


@pytest.mark.parametrize("real, n_in, n_state", [("float", 8, 7), ("double", 8, 7), ("float", 330, 328)])
def test_sim_payload_sizes(real, n_in, n_state):
    """The max payload holds a SIM request and a reply of at least one sample (a big state
    grows it), and sim_samples_for counts the samples that fit, no more."""
    size = P.REAL_SIZES[real]
    plain = P.max_payload_for(real, n_in, n_state, FW, P.max_batch_for(real, n_in, n_state))
    mp = P.max_payload_for(real, n_in, n_state, FW, P.max_batch_for(real, n_in, n_state), n_state=n_state)
    assert mp >= plain
    assert mp >= n_in * size + P.SIM_REQUEST_FIXED.size == len(sim_payload(np.zeros(n_in, P.REAL_DTYPES[real]), 1, 1, 0))
    k = P.sim_samples_for(real, n_state, mp)
    assert k >= 1
    assert P.SIM_REPLY_FIXED.size + k * (4 + n_state * size) <= mp < P.SIM_REPLY_FIXED.size + (k + 1) * (4 + n_state * size)
    if n_state * size > 2048:  # larger than the EVAL batches: sized by the one sample
        assert mp == max(n_in * size + P.SIM_REQUEST_FIXED.size, P.SIM_REPLY_FIXED.size + 4 + n_state * size, plain)
    assert P.SIM_REPLY_FIXED.size == 28 and P.SIM_REQUEST_FIXED.size == 12


def test_sim_reply_decodes_and_refuses_a_wrong_size():
    states = np.arange(6, dtype="<f4").reshape(2, 3)
    body = P.SIM_REPLY_FIXED.pack(2, 5, 1, 0, 2**33 + 7, 99)
    for w, s in zip((10, 11), states):
        body += np.uint32(w).tobytes() + s.tobytes()
    fixed, work, got = decode_sim(body, 2, 3, "<f4")
    assert fixed == (2, 5, 1, 0, 2**33 + 7, 99) and work.tolist() == [10, 11]
    assert np.array_equal(got, states)
    with pytest.raises(LinkError, match="SIM reply of"):
        decode_sim(body[:-1], 2, 3, "<f4")


def test_ulp_distance_counts_across_zero():
    a = np.array([1.0, -0.0, np.float32(1e-45)], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), 0.0, -np.float32(1e-45)], dtype=np.float32)
    assert ulp_distance(a, b).tolist() == [1, 0, 2]
