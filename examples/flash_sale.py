"""The case study's flash sale: a static plan for the peak against an autoscaled one.

The two-tower recommender of examples/size_case_study.py (user and item towers, then scoring,
as a Triton ensemble in pods of 2 GPUs; S(k) from the profiles in examples/profiles) serves a
flash sale: 3,000 req/s, a ramp to 10,000 req/s in 2 minutes, two hours at the peak, and back.
The SLO is p95 <= 5 ms, 0.5 ms of it the network's.

1. The static plan: ``qm.size(..., traffic=sale)`` sizes the pods for every rate of the sale,
   3,000 to 10,000 req/s.
2. The autoscaled plan: ``qm.size(..., traffic=sale, autoscale=qm.Autoscaler(...))``, a
   Horizontal Pod Autoscaler whose new pods serve 90 s after it asks for them; the plan
   chooses the knobs (one config.pbtxt) and the target, and reports the transient: the
   minutes after the ramp before the new pods are ready.
3. Both simulated through the whole sale (every request, ``qm.simulate(..., arrivals=sale,
   pods=...)``): the p95 of each minute against the SLO, the share of requests within it,
   and the cost in GPU-hours.
4. ``flash_sale.png`` (the figure for a design review) and each plan on disk (config.pbtxt,
   the HorizontalPodAutoscaler's hpa.yaml, report.md).

Run: ``make flash-sale`` (or ``python examples/flash_sale.py --out demo-out``; about three
minutes here). ``--hold`` shortens the sale (the test suite runs it with a 10-minute hold).
"""

import argparse
import time
from pathlib import Path

import numpy as np

import qmodel as qm

SLO, NETWORK = {"p95": 5e-3}, 0.5e-3
PROFILES = Path(__file__).parent / "profiles"
MODELS = {"user_tower": "user-tower", "item_tower": "item-tower", "scoring": "scoring"}
EDGES = [("user_tower", "scoring"), ("item_tower", "scoring")]
SEARCH = dict(gpus_per_node=2, instances_per_gpu=(1, 2, 4), max_batch_size=(1, 2, 4, 8, 16),
              max_queue_delay=(0, 0.5e-3, 1e-3, 2e-3), routers=("round_robin",),
              nodes=range(1, 17), sharing="independent")
WINDOW = 60.0


def pod(profiles):
    """The pipeline's shape; the search chooses each stage's knobs."""
    return qm.Ensemble({name: qm.Node(profiles[name].service(1)) for name in MODELS}, EDGES)


def minute_p95(result):
    """(minute starts, p95 of each minute) of a result over the sale."""
    return result.windowed_quantiles(0.95, WINDOW)


def describe(label, result, pods_seconds, traffic):
    within = result.within(SLO, network=NETWORK)["p95"]
    starts, p95 = minute_p95(result)
    over = np.nanmean(p95 + NETWORK > SLO["p95"])
    return (f"   {label:11} {pods_seconds / 3600:8.1f} pod-h  {within:8.3%} of requests within "
            f"5 ms (network included)  {over:6.1%} of minutes over the p95 SLO  worst minute "
            f"{np.nanmax(p95) * 1e3:,.1f} ms")


def main(out: str, hold: float) -> None:
    start_all = time.perf_counter()
    profiles = {name: qm.Profile.load(PROFILES / f"{file}.json")
                for name, file in MODELS.items()}
    sale = qm.Traffic.flash_sale(base=3000, peak=10_000, ramp=120, hold=hold, before=600,
                                 after=600)
    print(f"{sale.describe()}; SLO p95 <= 5 ms, 0.5 ms of it the network's\n")

    start = time.perf_counter()
    static = qm.size(pod(profiles), traffic=sale, slo=SLO, network=NETWORK, profiles=profiles,
                     **SEARCH)
    print("1. static plan for every rate of the sale "
          f"({time.perf_counter() - start:.0f} s)\n   "
          + static.summary().replace("\n", "\n   "))
    if not static.feasible:
        raise SystemExit("no static plan meets the SLO: the profiles changed")

    start = time.perf_counter()
    hpa = qm.Autoscaler(metric="utilization", scale_up_delay=90, min_pods=1, max_pods=16)
    auto = qm.size(pod(profiles), traffic=sale, slo=SLO, network=NETWORK, profiles=profiles,
                   autoscale=hpa, **SEARCH)
    print(f"\n2. autoscaled plan ({time.perf_counter() - start:.0f} s, its simulation "
          "included)\n   " + auto.summary().replace("\n", "\n   "))
    if not auto.feasible:
        raise SystemExit("no autoscaled plan meets the SLO in its settled minutes")

    start = time.perf_counter()
    static_sim = qm.simulate(static.system, arrivals=sale, seed=3)
    auto_sim = auto.simulated
    hours = sale.duration
    print(f"\n3. through the whole sale, simulated ({time.perf_counter() - start:.0f} s for the "
          "static plan; the autoscaled one is its verification)")
    print(describe("static", static_sim, static.nodes * sale.duration, sale))
    print(describe("autoscaled", auto_sim, auto.schedule.pod_seconds(), sale))
    print(f"   the autoscaled plan costs {auto.schedule.pod_seconds() / (static.nodes * hours):.0%}"
          " of the static one")

    folder = Path(out) / "flash_sale"
    folder.mkdir(parents=True, exist_ok=True)
    figure = plot(sale, static, static_sim, auto, folder / "flash_sale.png")
    written = static.write(folder / "static", name="recommender")
    written += auto.write(folder / "autoscaled", name="recommender")
    print(f"\n4. {figure}; the plans: {folder}/static/, {folder}/autoscaled/ "
          f"({len(written)} files, the autoscaler's hpa.yaml among them)")
    print(f"\n({time.perf_counter() - start_all:.0f} s in all)")


def plot(sale, static, static_sim, auto, path):
    """Windowed p95 of both plans (simulated) against the SLO, pods over time, the rate."""
    from qmodel.plots import plot_timeline

    series = {f"static, {static.nodes} pods (simulated)": minute_p95(static_sim),
              "autoscaled (simulated)": minute_p95(auto.simulated),
              "autoscaled (model)": ([r[0] for r in auto.windows],
                                     [r[2]["p95"] for r in auto.windows])}
    sched = auto.schedule
    pods = {"autoscaled, ready": (np.concatenate([sched.times, [sched.end]]),
                                  np.concatenate([sched.ready, sched.ready[-1:]])),
            "static": ([sale.start, sale.end], [static.nodes] * 2)}
    t = np.linspace(sale.start, sale.end, 2000)
    return plot_timeline(series, pods, path, wall=SLO["p95"] - NETWORK, key="p95",
                         rate=(t, sale.rate_at(t)),
                         title="flash sale: the static plan for 3k-10k req/s against an "
                               "autoscaled one (pods serve 90 s after they are asked for)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo-out", help="folder for the plans and figure")
    parser.add_argument("--hold", type=float, default=7200.0,
                        help="seconds at the peak (default two hours)")
    args = parser.parse_args()
    main(args.out, args.hold)
