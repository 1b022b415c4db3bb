"""Sizing Ensemble pods: the fewest pods for which stage knobs meeting the SLO exist.

Called by :func:`qmodel.sizing.size` for an Ensemble; the search over pod counts, the
configurations, the trust in a prediction and the plan are :mod:`qmodel.sizing`'s.
"""

from __future__ import annotations

import math

from .ensemble import Ensemble
from .predict import predict
from .sizing import (LEVELS, Candidate, Plan, _configurations, _fewest, _pareto, _services,
                     _simulate, _system, highest_quantile, model_answer, trusted_quantile)

__all__ = ["size_pods"]


def size_pods(ensemble, rate, load, slo, network, failures, counts, gpus_per_node,
                   cost_per_gpu, per_gpu, batches, delays, routers, verify, verify_requests,
                   seed, budget, profiles) -> Plan:
    """Pods, each serving the whole ensemble on gpus_per_node GPUs shared by its stages: the
    fewest pods for which stage knobs meeting the SLO exist.

    For a pod count N, each stage takes the configuration (instances per GPU, max_batch_size,
    max_queue_delay) whose own trusted quantile at the highest SLO level is lowest, solved
    alone under Poisson arrivals at the pod's rate; the ensemble so configured is then
    predicted end to end (by simulation where no model covers it) and checked against the
    SLO. Pod counts gallop up from the stable minimum as for a node. Choosing each stage for
    its own tail is a heuristic (the stages interact only through their arrival streams); the
    plan is verified end to end, not stage by stage. A stage named in ``profiles`` takes its
    S(k) at i instances per GPU from the profile's concurrency i.
    """
    notes = ["each stage's knobs chosen for its own tail at the pod's rate; instances of all "
             "stages share the pod's GPUs, and a stage's S(k) is not slowed by the other "
             "stages' instances"]
    stages = ensemble.order
    level = LEVELS[highest_quantile(slo)]     # each stage is chosen for this tail
    options = {}
    for name, node in ensemble.stages.items():
        services, stage_notes, _ = _services(profiles.get(name, node.service), per_gpu)
        notes += [f"{name}: {note}" for note in stage_notes]
        options[name] = _configurations(services, per_gpu, batches, delays, gpus_per_node,
                                        node.overhead)
    best_node: dict = {}
    predictions = [0]

    def stage_choice(name, pod_rate):
        key = (name, pod_rate)
        if key not in best_node:
            ranked = []
            for node in options[name]:
                if pod_rate >= node.capacity:
                    continue
                predictions[0] += 1
                try:
                    r = model_answer(node, pod_rate, budget)
                except NotImplementedError:
                    continue
                ranked.append((trusted_quantile(r, level), -node.capacity, id(node), node))
            best_node[key] = min(ranked)[3] if ranked else None
        return best_node[key]

    results: dict = {}

    def pods_feasible(count, router):
        active = count - failures
        if active < 1:
            return False
        chosen = {n: stage_choice(n, load / active) for n in stages}
        if any(node is None for node in chosen.values()):
            return False
        pod = Ensemble(chosen, list(ensemble.edges))
        system = _system(pod, router, active)
        predictions[0] += 1
        r = predict(system, rate=load, budget=budget)
        trusted = {k: trusted_quantile(r, LEVELS[k]) + network for k in slo}
        results[(count, router)] = (pod, r, max(trusted[k] / slo[k] for k in slo))
        return all(trusted[k] <= slo[k] for k in slo)

    plans = []
    for router in routers:
        fewest = max(math.floor(load / max(o.capacity for o in options[n])) + 1
                     for n in stages) + failures
        allowed = [n for n in counts if n >= fewest]
        index = _fewest(allowed, lambda n, router=router: pods_feasible(n, router))
        if index is not None:
            plans.append((allowed[index], router))
    space = math.prod(len(options[n]) for n in stages) * len(routers) * len(counts)
    cost_of = gpus_per_node * cost_per_gpu
    extra = {"network": network, "load": load, "failures": failures}
    evaluated = [Candidate(pod, router, count, count * cost_of, ratio <= 1.0,
                           {k: float(r.quantile(LEVELS[k])) for k in slo},
                           {k: trusted_quantile(r, LEVELS[k]) + network for k in slo},
                           ratio, r.method)
                 for (count, router), (pod, r, ratio) in results.items()]
    alternatives = tuple(sorted((c for c in evaluated if c.feasible),
                                key=lambda c: (c.cost, c.worst_ratio)))
    pareto = tuple(_pareto(evaluated))
    if not plans:
        if results:
            (count, router), (pod, r, ratio) = min(results.items(), key=lambda kv: kv[1][2])
            reason = (f"no pod count within {counts[-1]} meets the SLO; the closest, {count} "
                      f"pods, reaches {ratio:.2f} x its target")
            system, predicted = _system(pod, router, count), r
        else:
            count, reason = counts[-1], (f"no pod count within {counts[-1]} carries "
                                         f"{load:,.0f} req/s")
            system, predicted = ensemble, None
        return Plan(False, reason, system, count, count * gpus_per_node, count * cost_of,
                    predicted, None, "not verified (infeasible)", alternatives, pareto, space,
                    predictions[0], dict(slo), rate, tuple(notes), **extra)
    count, router = min(plans, key=lambda p: (p[0], results[p][2]))
    pod, predicted, _ = results[(count, router)]
    simulated, verification, misses = None, "not verified (verify=False)", []
    if verify:
        simulated = _simulate(_system(pod, router, count - failures), load, verify_requests,
                              seed)
        misses = [k for k in slo if simulated.ci(LEVELS[k])[1] + network > slo[k]]
        verification = (f"simulated {simulated.requests:,} requests (seed {seed}) at "
                        f"{load:,.6g} req/s with {failures} pod(s) down: "
                        + (f"missed {', '.join(misses)}" if misses else
                           "every SLO quantile's 95% CI upper end meets its target plus the "
                           "network budget"))
    reason = (f"the chosen pods' simulation missed {', '.join(misses)} (the stage-by-stage "
              "choice found no verified plan)" if misses else "")
    return Plan(not misses, reason, _system(pod, router, count), count, count * gpus_per_node,
                count * cost_of, predicted, simulated, verification, alternatives, pareto,
                space, predictions[0], dict(slo), rate, tuple(notes), **extra)
