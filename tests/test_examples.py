"""The example scripts run to the end and print their story.

Each runs in a fresh interpreter, as ``make demo`` runs it, writing into a temporary folder.
The default run takes make demo's two scripts (the case study in its ``--quick`` mode, about
25 s); the full runs, the ensemble case study (20 s) and the flash sale (a minute even held
5 minutes) are marked slow.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# arguments beyond --out: the flash sale held 5 minutes, not 2 hours
ARGUMENTS = {"flash_sale.py": ["--hold", "300"]}
# script -> lines its output must hold (the conclusions, not the numbers)
EXPECTED = {
    "size_case_study.py": ["feasible:", "holds at every rate in [1,000, 10,000] req/s",
                           "range's plan", "planned together (qmodel.size)", "5. the plan:"],
    "flash_sale.py": ["1. static plan for every rate of the sale", "2. autoscaled plan",
                      "pod(s) autoscaled", "the autoscaled plan costs", "flash_sale.png"],
    "demo.py": ["1. random router: predicted against simulated", "plot:"],
    "ensemble_case_study.py": ["1. end to end", "3. which stage holds the tail", "plots:"],
}


# the default run's: make demo's scripts, the case study in its quick mode
QUICK = {"demo.py": [], "size_case_study.py": ["--quick"]}


def test_every_named_example_is_run_here(named_scripts):
    """The examples README.md, docs/ and the Makefile name all have a run in this file."""
    named = named_scripts("examples")
    assert named and named <= set(EXPECTED), named - set(EXPECTED)
    assert set(QUICK) <= set(EXPECTED)


@pytest.mark.parametrize("script", sorted(QUICK))
def test_example_quick_run(script, tmp_path):
    _check(script, tmp_path, QUICK[script])


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs(script, tmp_path):
    _check(script, tmp_path, ARGUMENTS.get(script, []))


def _check(script, tmp_path, arguments):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--out",
                           str(tmp_path), *arguments], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in EXPECTED[script]:
        assert line in done.stdout, f"{script} did not print {line!r}:\n{done.stdout[-3000:]}"
    if script == "size_case_study.py":
        # the plan's folder: a config per model of the ensemble, the report and its figures
        plan = tmp_path / "plan"
        for path in ("recommender/config.pbtxt", "item_tower/config.pbtxt", "report.md",
                     "pareto.png", "rate_sweep.png", "batch_sweep.png"):
            assert (plan / path).is_file(), path
    if script == "flash_sale.py":
        sale = tmp_path / "flash_sale"
        for path in ("flash_sale.png", "autoscaled/hpa.yaml", "autoscaled/schedule.png",
                     "static/recommender/config.pbtxt", "autoscaled/report.md"):
            assert (sale / path).is_file(), path
