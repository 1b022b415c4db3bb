"""qmodel.triton.read_trace on the real trace of tests/data/triton (made by its capture.py)
and on malformed ones (issue 22, items 2 and 4)."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from qmodel.triton import read_stats, read_trace

DATA = Path(__file__).parent / "data" / "triton"


def test_real_trace_batches_agree_with_the_statistics_api():
    t = read_trace(DATA / "trace.json.gz")
    s = read_stats(DATA / "stats_before.json", DATA / "stats_after.json")
    assert t.model == "affine" and t.dropped == 2
    assert t.sizes.sum() == t.waits.size == t.outside.size
    assert set(t.sizes.tolist()) <= set(s.executions) and np.all(t.waits >= 0)
    assert np.all(np.diff(t.starts) > 0)
    # each size's mean execution (instance held) is the statistics' input + infer + output,
    # within 10% on the sizes traced often
    for k, times in t.samples().items():
        if len(times) >= 30:
            assert np.mean(times) == pytest.approx(s.batch_time()[k], rel=0.10)
    # outside the batcher: parsing and sending, a fraction of a millisecond
    assert 0 < np.median(t.outside) < 0.5e-3


def test_parsed_events_and_the_file_give_the_same_batches():
    events = json.loads(gzip.open(DATA / "trace.json.gz", "rt").read())
    a, b = read_trace(events), read_trace(DATA / "trace.json.gz")
    assert np.array_equal(a.sizes, b.sizes) and np.array_equal(a.outside, b.outside)
    kept = read_trace(events, edges=False)
    assert kept.dropped == 0 and kept.sizes.size == a.sizes.size + 2


def test_malformed_traces_are_named(tmp_path):
    bad = tmp_path / "trace.json"
    bad.write_text('[{"id": 1,\n "model_name": "m"\n')
    with pytest.raises(ValueError, match=rf"^{bad}:3: not JSON"):
        read_trace(bad)
    with pytest.raises(ValueError, match="cannot read"):
        read_trace(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="not a Triton trace"):
        read_trace([{"timestamps": []}])
    events = [{"id": 1, "model_name": "m"},
              {"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 5}]}]
    with pytest.raises(ValueError, match="no request of 'm' has QUEUE_START, COMPUTE_START, "
                                         "COMPUTE_END: trace with level=TIMESTAMPS"):
        read_trace(events)
    with pytest.raises(ValueError, match=r"no requests of model 'x' \(the trace holds m\)"):
        read_trace(events, model="x")
    two = events + [{"id": 2, "model_name": "n"}]
    with pytest.raises(ValueError, match="holds models m, n: pass model="):
        read_trace(two)
