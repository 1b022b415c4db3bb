"""Every benchmark that README.md, docs/ or ``make bench`` names runs to its end from this
checkout, as a user runs it: a refusal, a renamed argument or a moved module breaks this test,
not a user (``make bench`` crashed unnoticed once).

The default run takes each script's smallest mode (seconds); the commands the docs give, with
their full runs, are marked slow. The figures are not checked here (machines vary 2x); each
script's own lines that must appear are.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script (and a label where one script has two runs) -> (arguments of its smallest run,
# lines its output must hold)
SMOKE = {
    "sim_speed.py": (["--quick", "--no-peers", "--cases", "a", "--repeat", "1", "--big",
                      "200000"], ["qmodel (a)", "exact M/M/1 p99"]),
    "predict_speed.py": (["--smoke"], ["predict(), 2 configurations", "The same answer by "
                                       "simulation", "power_of_two", "simulation fallback"]),
    "size_speed.py": (["--smoke"], ["baseline, every candidate predicted"]),
    "predict_speed_paired.py": (["--rev", "HEAD", "--smoke"], ["median speed-up per node"]),
    "predict_speed_paired.py --clusters": (["--rev", "HEAD", "--smoke", "--clusters"],
                                           ["power_of_two  N=8    B=8"]),
    "sim_cost.py": (["--smoke"], ["least_outstanding"]),
    "kernel_timings.py": (["--workloads", "matmul", "--batch-sizes", "1,2", "--concurrency",
                           "1", "--repeats", "3", "--warmup", "1", "--out", "{tmp}/k"],
                          ["wrote"]),
}
# the runs make bench and the docs give
FULL = {
    "sim_speed.py": ([], ["exact M/M/1 p99"]),
    "predict_speed.py": ([], ["90th percentile", "simulation fallback"]),
    "size_speed.py": ([], ["search + verification", "range 1,000-10,000 req/s",
                           "every candidate of the full space would take"]),
}


def _run(script, args, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert done.returncode == 0, f"{script} {' '.join(args)}:\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_named_benchmark_has_a_run_here(named_scripts):
    """Every benchmark README.md, docs/ and the Makefile name; peers.py is a library of
    reference simulators (tests/test_peers.py runs it)."""
    named = named_scripts("benchmarks") - {"peers.py"}
    assert named and named <= set(SMOKE), named - set(SMOKE)
    assert set(FULL) <= set(SMOKE)


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_smoke_run(script, tmp_path):
    if script.startswith("predict_speed_paired.py") and not (ROOT / ".git").exists():
        pytest.skip("compares with a git revision: needs a git checkout")
    args, lines = SMOKE[script]
    out = _run(script.split()[0], args, tmp_path)
    for line in lines:
        assert line in out, f"{script} did not print {line!r}:\n{out[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(FULL))
def test_benchmark_full_run(script, tmp_path):
    args, lines = FULL[script]
    out = _run(script, args, tmp_path)
    for line in lines:
        assert line in out, f"{script} did not print {line!r}:\n{out[-3000:]}"
