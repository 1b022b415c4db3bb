"""Refresh the stored predictions that the bunched-instance model now gives.

Several deterministic instances without a delay, whose queue refills faster than they serve,
are answered by the bunched model (qmodel/theory/batch/bunched.py) since 2026-11-29; before,
the staggered-instance chain answered them, 20-41% low on p99 where the service time grows
little with the batch. The stored campaigns keep their simulations; this script predicts
again, with ``qmodel.predict`` as each campaign does, every stored row whose node now bunches
(a single node, or a random router's nodes under their Poisson share of the rate) or was
stored as bunched, and every grid node of several deterministic instances without a delay,
and writes the rows back:

- validation/results/predict_accuracy.json (the grid; ``refresh_model`` of its script),
  multi_instance_holdout.json (``refresh``), batch_size_accuracy.json (means);
- the rows of validation/wide_domain.py's format: wide_domain.json, ordinary_domain.json,
  ordinary_domain_2.json and domain_check.json; there also every node of several
  instances, deterministic or with a jitter cv of at most SPREAD_JITTER, with a delay of at
  most SPREAD_DELAY S(1), behind any router (since 2026-11-29 a delay up to TINY_DELAY S(1)
  and a jitter cv up to BUNCH_JITTER bunch, and above them up to SPREAD_DELAY and
  SPREAD_JITTER no model answers a node inside the rule). A row predict now declines keeps
  its simulation as ``simulated_p50`` .. ``simulated_p99`` and the reason as ``declined``.

It prints each refreshed row's p99 error before and after. Then: ``python
validation/measured_errors.py --write`` and ``python -m qmodel.campaign.doc_tables --write``.

Run: ``.venv/bin/python validation/bunched_refresh.py`` (about a minute).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import qmodel as qm                                                  # noqa: E402
from qmodel.campaign.grids import GRID_SERVICE, HOLDOUT_SERVICE      # noqa: E402
from qmodel.theory.batch.bunched import FAMILY, bunches, may_bunch  # noqa: E402

import multi_instance_holdout                                       # noqa: E402
import predict_accuracy                                             # noqa: E402
from wide_domain import LEVELS, system_of                           # noqa: E402

RESULTS = Path("validation/results")
WIDE_FILES = ("wide_domain.json", "ordinary_domain.json", "ordinary_domain_2.json",
              "domain_check.json")


def _grid_bunches(row, service) -> bool:
    """Whether the grid row's node is one the rule may take or have taken: several
    deterministic instances without a delay (few; all predicted again)."""
    return row["D_over_S1"] == 0 and row["jitter"] == "deterministic" and row["c"] > 1 \
        and row["B"] > 1


def _wide_bunches(row) -> bool:
    """Whether the row's system is answered through a bunched node (single, or random), or
    was when stored (a rule since tightened), or has nodes the rule reads (``may_bunch``),
    behind any router."""
    if "p99" not in row:
        return False
    system, node = system_of(row)
    if may_bunch(node):
        return True
    if row.get("router") not in (None, "random"):
        return False
    return (bunches(node, row["load"] * system.capacity / row.get("N", 1))
            or FAMILY in row["families"])


def refresh_wide(row) -> dict:
    """A wide_domain.py row predicted again as its ``run_one`` predicts (the simulation
    stays)."""
    system, node = system_of(row)
    try:
        pred = qm.predict(system, rate=row["load"] * system.capacity, fallback="raise",
                          extrapolate=True)
    except NotImplementedError as err:
        row = dict(row, declined=str(err), families=[])
        for name, _ in LEVELS:
            level = row.pop(name)
            row[f"simulated_{name}"] = {"simulated": level["simulated"],
                                        "ci99": level["ci99"]}
        return row
    row = dict(row, method=pred.method, exactness=pred.accuracy.exactness,
               families=[m.family for m in pred.accuracy.measured],
               outside=pred.accuracy.approximation("outside_measured_domain") is not None,
               lattice_step=pred.accuracy.lattice_step)
    for name, p in LEVELS:
        q = float(pred.quantile(p))
        row[name] = dict(row[name], predicted=q, error=q / row[name]["simulated"] - 1)
    return row


def _write(name: str, rows) -> None:
    """``rows`` in place of the file's, in its layout (indent 1 and no final newline as
    the grids' writer, indent 0 and one as wide_domain.py's)."""
    path = RESULTS / name
    old = path.read_text()
    second = old.splitlines()[1]
    text = json.dumps(rows, indent=len(second) - len(second.lstrip()))
    path.write_text(text + "\n" if old.endswith("\n") else text)


def _changed(label: str, before: float, after: float) -> None:
    print(f"  {label}: p99 {before:+.1%} -> {after:+.1%}")


def main() -> None:
    rows = json.loads((RESULTS / "predict_accuracy.json").read_text())
    print("predict_accuracy.json")
    for i, r in enumerate(rows):
        if _grid_bunches(r, GRID_SERVICE):
            rows[i] = predict_accuracy.refresh_model(r)
            _changed(f"B={r['B']} c={r['c']} load {r['load']}", r["p99"]["error"],
                     rows[i]["p99"]["error"])
    _write("predict_accuracy.json", rows)

    rows = json.loads((RESULTS / "multi_instance_holdout.json").read_text())
    print("multi_instance_holdout.json")
    for i, r in enumerate(rows):
        if _grid_bunches(r, HOLDOUT_SERVICE):
            shipped = str(multi_instance_holdout.PASSES)
            before = r["predicted"][shipped][1] / r["simulated"][1] - 1
            rows[i] = multi_instance_holdout.refresh([dict(r)],
                                                     [int(k) for k in r["predicted"]])[0]
            _changed(f"B={r['B']} c={r['c']} load {r['load']}", before,
                     rows[i]["predicted"][shipped][1] / r["simulated"][1] - 1)
    _write("multi_instance_holdout.json", rows)

    rows = json.loads((RESULTS / "batch_size_accuracy.json").read_text())
    print("batch_size_accuracy.json")
    for r in rows:
        if _grid_bunches(r, GRID_SERVICE):
            node = GRID_SERVICE.node(r["B"], r["D_over_S1"], r["c"], r["jitter"])
            pred = qm.predict(node, rate=r["load"] * node.capacity, fallback="raise",
                              extrapolate=True)
            print(f"  B={r['B']} c={r['c']} load {r['load']}: mean batch "
                  f"{r['batch'][0]:.3f} -> {pred.mean_batch_size:.3f} (simulated "
                  f"{r['batch'][1]:.3f})")
            r["batch"][0], r["utilization"][0] = pred.mean_batch_size, pred.utilization
            r["capped"] = pred.accuracy.approximation("utilization_capped") is not None
    _write("batch_size_accuracy.json", rows)

    for name in WIDE_FILES:
        rows = json.loads((RESULTS / name).read_text())
        print(name)
        for i, r in enumerate(rows):
            if _wide_bunches(r):
                rows[i] = refresh_wide(r)
                label = f"#{r['index']} B={r['B']} c={r['c']} load {r['load']:.3f}"
                if "p99" in rows[i]:
                    _changed(label, r["p99"]["error"], rows[i]["p99"]["error"])
                else:
                    print(f"  {label}: p99 {r['p99']['error']:+.1%} -> declined")
        _write(name, rows)


if __name__ == "__main__":
    main()
