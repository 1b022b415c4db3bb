"""qmodel.profile: measured batch times, every sample kept (issue 22, item 1)."""

import json

import numpy as np
import pytest

import qmodel as qm
from qmodel.profiling import Profile, profile


def test_every_run_after_the_warm_up_is_a_sample_at_every_concurrency():
    calls = []

    def workload(k):
        calls.append(k)
        return np.ones(k).sum()

    p = profile(workload, batch_sizes=[4, 1, 4], repeats=3, warmup=2, concurrency=(1, 2))
    assert sorted(p.samples) == [1, 2] and sorted(p.samples[1]) == [1, 4]
    assert [len(p.samples[m][k]) for m in (1, 2) for k in (1, 4)] == [3, 3, 6, 6]
    # one run per copy per repeat, warm-up included: (2 + 3) x (1 + 2 copies) per size
    assert calls.count(1) == calls.count(4) == 5 * 3
    assert all(x > 0 for m in p.samples for k in p.samples[m] for x in p.samples[m][k])


@pytest.mark.parametrize("workload", ["two-tower", "user-tower", "item-tower", "scoring",
                                      "matmul", "conv", "math:sqrt"])
def test_built_in_and_named_workloads_run(workload):
    p = profile(workload, batch_sizes=[1, 3], repeats=2, warmup=0)
    assert p.workload == workload and p.versions["numpy"] == np.__version__
    # every size timed as often as asked, every sample a positive finite time
    assert sorted(p.samples[1]) == [1, 3] and all(len(v) == 2 for v in p.samples[1].values())
    assert all(0 < x < 60 for v in p.samples[1].values() for x in v)
    service = p.service()
    assert isinstance(service, qm.ServiceTime)
    assert service.mean(3) == pytest.approx(np.mean(p.samples[1][3]))


def test_fit_recovers_a_known_affine_law():
    rng = np.random.default_rng(1)
    samples = {k: (1e-3 + 2e-4 * k) * rng.lognormal(-0.005, 0.1, 4000) for k in (1, 4, 16)}
    p = Profile("synthetic", "none", {}, {1: {k: v.tolist() for k, v in samples.items()}})
    law, error = p.fit()
    assert law.base == pytest.approx(1e-3, rel=0.02)
    assert law.per_item == pytest.approx(2e-4, rel=0.02)
    assert error["cv"] == pytest.approx(0.1, rel=0.05) and error["mean_error"] < 0.01
    assert law.jitter == "lognormal" and law.cv == pytest.approx(0.1, rel=0.05)
    # the empirical law keeps the samples as they are
    assert float(p.service().mean(4)) == pytest.approx(np.mean(samples[4]))


def test_save_and_load_round_trip_and_errors(tmp_path):
    p = profile("matmul", batch_sizes=[1, 2], repeats=2, warmup=0, concurrency=(1, 2))
    path = tmp_path / "p.json"
    p.save(path)
    q = Profile.load(path)
    assert q.samples == p.samples and q.device == p.device and q.workload == "matmul"
    path.write_text('{"format": "qmodel-profile-1",\n "samples": ')
    with pytest.raises(ValueError, match=rf"^{path}:2: not JSON"):
        Profile.load(path)
    path.write_text(json.dumps({"samples": {}}))
    with pytest.raises(ValueError, match="not a qmodel profile"):
        Profile.load(path)
    with pytest.raises(ValueError, match=r"has concurrency \[1, 2\], not 3"):
        p.service(3)


def test_blas_threads_are_limited_while_timing_and_recorded():
    from threadpoolctl import threadpool_info

    seen = []

    def workload(k):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

    p = profile(workload, batch_sizes=[1], repeats=2, warmup=0, blas_threads=1)
    assert p.versions["blas_threads"] == 1 and seen and all(s <= {1} for s in seen)
    assert "blas_threads" not in profile(workload, batch_sizes=[1], repeats=1,
                                         warmup=0).versions


@pytest.mark.parametrize("kwargs, message", [
    (dict(workload="resnet"), "workload must be one of"),
    (dict(workload="no_such_module:f"), "cannot import it"),
    (dict(batch_sizes=[0, 1]), "batch_sizes must be whole numbers >= 1"),
    (dict(batch_sizes="1-8"), "batch_sizes must be whole numbers"),
    (dict(repeats=0), "repeats must be a whole number >= 1"),
    (dict(concurrency=0), "concurrency must be whole numbers >= 1"),
    (dict(seed=-1), "seed must be a whole number >= 0"),
    (dict(blas_threads=0), "blas_threads must be a whole number >= 1"),
])
def test_bad_arguments_name_the_field(kwargs, message):
    args = dict(workload="matmul", batch_sizes=[1], repeats=1, warmup=0) | kwargs
    with pytest.raises(ValueError, match=message):
        profile(**args)


def test_cupy_profile_on_a_gpu():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (no GPU on this machine)")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as err:           # CuPy without a driver or device
        pytest.skip(f"no CUDA device: {err}")
    p = profile("two-tower", batch_sizes=[1, 8, 64], repeats=5, warmup=2, concurrency=(1, 2),
                backend="cupy")
    assert p.device.startswith("gpu:") and "cupy" in p.versions
    assert len(p.samples[2][64]) == 10 and all(x > 0 for x in p.samples[1][1])


def test_cupy_backend_without_a_gpu_says_so():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        pytest.skip("a GPU is here: test_cupy_profile_on_a_gpu covers the backend")
    except Exception:
        pass
    with pytest.raises(ValueError, match="backend='cupy' needs CuPy and a CUDA GPU"):
        profile("matmul", batch_sizes=[1], repeats=1, backend="cupy")
    with pytest.raises(ValueError, match="backend must be 'numpy' or 'cupy'"):
        profile("matmul", batch_sizes=[1], repeats=1, backend="torch")


def test_copies_in_processes_time_every_run_at_every_concurrency():
    """copies='processes': each copy in a process of its own (as Triton's Python backend runs
    an instance), told which size to time; the same samples as threads give, by count."""
    p = profile("matmul", batch_sizes=[1, 4], repeats=3, warmup=1, concurrency=(1, 2),
                copies="processes")
    assert p.versions["copies"] == "processes"
    assert [len(p.samples[m][k]) for m in (1, 2) for k in (1, 4)] == [3, 3, 6, 6]
    assert all(0 < x < 60 for m in p.samples for v in p.samples[m].values() for x in v)
    with pytest.raises(ValueError, match="named workload"):
        profile(lambda k: k, batch_sizes=[1], repeats=1, copies="processes")
    with pytest.raises(ValueError, match="copies must be"):
        profile("matmul", batch_sizes=[1], repeats=1, copies="fibres")


def test_a_copy_that_fails_in_its_process_is_reported_not_awaited():
    # operator.truediv(k) raises in the copies' processes, when they time it
    with pytest.raises(ValueError, match="a profiling copy failed: TypeError: .*truediv"):
        profile("operator:truediv", batch_sizes=[1], repeats=1, concurrency=(3,),
                copies="processes")


def test_check_of_nothing_to_compare_and_of_a_bad_level():
    assert Profile("w", "cpu", {}, {}).check() == []
    assert Profile("w", "cpu", {}, {1: {1: [1.0]}}).check() == []       # one size alone
    with pytest.raises(ValueError, match="batch size 1 has no runs"):
        Profile("w", "cpu", {}, {1: {1: [], 2: [1.0]}}).check()
    for alpha in (0, -1, 1.5):
        with pytest.raises(ValueError, match="alpha must be a probability"):
            Profile("w", "cpu", {}, {1: {1: [1.0], 2: [1.0]}}).check(alpha)
