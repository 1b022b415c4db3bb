"""The seed's case study as an ensemble: a two-tower recommender at 10k req/s on 4 pods.

The deployment of the case study (docs/ensembles.md): a Triton ensemble of a user tower and an
item tower, which both read the request, and a scoring step that reads both towers' outputs;
4 pods behind a round-robin load balancer, each with 2 GPUs and 4 instances per GPU of every
model (8 per pod); dynamic batching with max_batch_size 8, preferred sizes 1, 2 and 4 and
max_queue_delay 1 ms; 10,000 requests per second; a 5 ms p95 SLO, of which 0.5 ms is kept for
the network.

The case study gives no execution times. Those below are illustrative GPU towers (lognormal
jitter), chosen in the 0.2-5 ms range the seed quotes for model execution (the sizing demo,
examples/size_case_study.py, uses measured ones). Run: python examples/ensemble_case_study.py
--out demo-out (about 25 s).

1. The ensemble predicted end to end and simulated (95% confidence intervals), with each
   stage's own latency, utilization and batch size.
2. The SLO check.
3. Which stage holds the tail, and what each stage's knobs do to p99.
4. The Triton model repository of this deployment (config.pbtxt per model).
"""

import argparse
import time
from pathlib import Path

import qmodel as qm
from qmodel.plots import plot_bottleneck, plot_latency

SLO_P95, NETWORK = 5e-3, 0.5e-3


def case_study():
    """The deployment: 4 pods, each the whole ensemble."""
    def tower(base, per_item, cv):
        return qm.ServiceTime.affine(base, per_item, jitter=("lognormal", cv))

    knobs = dict(max_batch_size=8, max_queue_delay=1e-3, preferred_batch_sizes=(1, 2, 4),
                 instances=8)
    ensemble = qm.Ensemble(
        {"user_tower": qm.Node(tower(2.0e-3, 0.25e-3, 0.15), **knobs),
         "item_tower": qm.Node(tower(2.6e-3, 0.30e-3, 0.15), **knobs),
         "scoring": qm.Node(tower(0.6e-3, 0.05e-3, 0.05), **knobs)},
        [("user_tower", "scoring"), ("item_tower", "scoring")])
    return qm.Cluster(ensemble, count=4, router="round_robin")


def main(out: str) -> None:
    pods, rate = case_study(), 10_000.0
    print("4 pods x ensemble (user_tower, item_tower -> scoring), round robin, "
          f"{rate:,.0f} req/s\n")
    pred = qm.predict(pods, rate=rate)
    if pred.accuracy.is_fallback:
        print(f"predict answered by simulation: {pred.accuracy.fallback_reason}\n"
              "the model's own answer (extrapolate=True) is shown against the simulation\n")
    start = time.perf_counter()
    pred = qm.predict(pods, rate=rate, extrapolate=True)
    took_pred = time.perf_counter() - start
    start = time.perf_counter()
    sim = qm.simulate(pods, rate=rate, requests=2_000_000, seed=1)
    took_sim = time.perf_counter() - start

    print("1. end to end        p50 ms   p95 ms   p99 ms   p99 95% CI")
    lo, hi = sim.ci(0.99)
    for label, r, extra in (("predicted", pred, f"({took_pred * 1e3:.0f} ms)"),
                            ("simulated", sim, f"[{lo * 1e3:.2f}, {hi * 1e3:.2f}] "
                                               f"({took_sim:.1f} s)")):
        print(f"   {label:16}{r.p50 * 1e3:8.2f}{r.p95 * 1e3:9.2f}{r.p99 * 1e3:9.2f}   {extra}")
    print(f"   error of the prediction: p95 {pred.p95 / sim.p95 - 1:+.1%}, "
          f"p99 {pred.p99 / sim.p99 - 1:+.1%}")
    print(f"   model: {pred.method}\n   claims: {pred.accuracy.exactness}: "
          f"{pred.accuracy.statement}\n")
    print("   stage        own p99 ms (pred / sim)   utilization   mean batch")
    for name in ("user_tower", "item_tower", "scoring"):
        p, s = pred.stages[name], sim.stages[name]
        print(f"   {name:12}{p.p99 * 1e3:10.2f} / {s.p99 * 1e3:5.2f}"
              f"{p.utilization:14.2f}{p.mean_batch_size:13.2f}")

    budget = SLO_P95 - NETWORK
    print(f"\n2. SLO: p95 <= {SLO_P95 * 1e3:g} ms with {NETWORK * 1e3:g} ms for the network, so "
          f"<= {budget * 1e3:g} ms in the servers: predicted {pred.p95 * 1e3:.2f} ms "
          f"({'meets' if pred.p95 <= budget else 'misses'} it), simulated "
          f"{sim.p95 * 1e3:.2f} ms ({'meets' if sim.p95 <= budget else 'misses'} it)")

    print("\n3. which stage holds the tail (qmodel.bottleneck)")
    start = time.perf_counter()
    report = qm.bottleneck(pods, rate)
    print("   " + report.table().replace("\n", "\n   "))
    print(f"   ({time.perf_counter() - start:.1f} s)")

    folder = Path(out) / "case_study_repository"
    try:
        from qmodel.triton import write_config
        texts = write_config(pods.nodes[0], "recommender", gpus=[0, 1])
    except ImportError as err:          # the [triton] extra writes config.pbtxt
        print(f"\n4. Triton model repository: not written ({err})")
    else:
        for model, text in texts.items():
            (folder / model).mkdir(parents=True, exist_ok=True)
            (folder / model / "config.pbtxt").write_text(text)
        print(f"\n4. Triton model repository: {folder}/ (recommender, user_tower, "
              "item_tower, scoring)")
    paths = [plot_latency({"predicted": pred, "simulated": sim}, f"{out}/case_study_latency.png",
                          title="two-tower ensemble, 4 pods, 10k req/s"),
             plot_bottleneck(report, f"{out}/case_study_bottleneck.png")]
    print("plots: " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo-out", help="folder for the plots and configs")
    main(parser.parse_args().out)
