"""Budgets: the numeric models estimate their memory and work first and decline past the
budget (issue 21, cases 6 and 7), and the cheaper forms of the work answer as before."""

import math
import sys

import numpy as np
import pytest

import qmodel as qm
from qmodel.sim import run as sim_run
from qmodel.theory import budget, jsq
from qmodel.theory.batch import DEFAULT_RESOLUTION, DEFAULT_TAIL, banded, blocking, chain
from qmodel.theory.batch.arrivals import Arrivals
from qmodel.theory.batch.instances import PASSES
from qmodel.theory.batch.node import solve_batch_node
from qmodel.theory.batch.rules import Rules

# issue 21 case 6: preferred sizes near capacity (8.5 GB, or numpy's MemoryError, before)
CASE6 = qm.Node(qm.ServiceTime.affine(0.033, 0.00015, jitter=("lognormal", 0.3)),
                max_batch_size=78, max_queue_delay=0.0009, preferred_batch_sizes=(12, 18, 46))
# issue 21 case 7: power of 8 over 37 nodes of max_batch_size 99 (168 s for one predict)
CASE7 = qm.Cluster(qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=99,
                           max_queue_delay=56e-6),
                   count=37, router=qm.Router("power_of_d", choices=8))


def test_budget_fields_are_checked():
    assert qm.Budget().limit_bytes == budget.MEMORY
    assert qm.Budget().limit_seconds == budget.TIME
    assert qm.Budget(memory=math.inf).limit_bytes == math.inf
    assert qm.Budget(memory=np.int64(2 ** 30), time=np.float32(2.5)).limit_seconds == 2.5
    for bad in (0, -1.0, "1GiB", True, math.nan):
        with pytest.raises(ValueError, match="Budget.memory"):
            qm.Budget(memory=bad)
        with pytest.raises(ValueError, match="Budget.time"):
            qm.Budget(time=bad)
    with pytest.raises(ValueError, match="budget must be a qmodel.Budget"):
        qm.predict(CASE6, rate=10.0, budget=5.0)


def test_the_account_sums_the_work_of_one_prediction():
    with budget.limits(qm.Budget(time=1.0)):
        budget.charge(0.6, "the model", "a first step")
        with pytest.raises(budget.OverBudget, match=r"about 0\.5 s of work for a second step "
                                                    r"after 0\.6 s already spent \(budget 1 s\)"):
            budget.charge(0.5, "the model", "a second step")
        budget.charge(0.4, "the model", "a smaller one")          # the refused one cost nothing
    # outside an account each step stands alone
    budget.charge(0.9 * budget.TIME, "the model", "a step")
    budget.charge(0.9 * budget.TIME, "the model", "a step")
    assert issubclass(budget.OverBudget, NotImplementedError)


def test_case6_chain_is_banded_by_queue_length(monkeypatch):
    """Several sizes that leave requests behind made the chain's band as wide as the queue
    (2.4 GiB at load 0.974, more near capacity); numbered by queue length it spans a
    blocking's arrivals."""
    seen = {}
    stationary = banded.BandedChain.stationary

    def spy(self):
        seen.update(size=self.size, width=max(self.hi, 1) + max(-self.lo, 1))
        return stationary(self)

    monkeypatch.setattr(banded.BandedChain, "stationary", spy)
    # the chain's mechanics, also outside the preferred-size family's measured domain
    r = qm.predict(CASE6, rate=0.9 * CASE6.capacity, fallback="raise", extrapolate=True)
    assert np.isfinite(r.p99)
    # four sizes leave requests behind: numbered size by size, the band (7,010) was wider
    # than the system (4,454 states); now 1,680
    assert seen["width"] < seen["size"] / 2


def test_case6_estimate_before_the_chain_is_built(monkeypatch):
    """At 0.974 of capacity the chain needs about half a GiB; under a smaller budget the model
    declines with the numbers before it allocates the band."""
    def no_band(self):
        raise AssertionError("the band was built past the budget")

    monkeypatch.setattr(banded.BandedChain, "stationary", no_band)
    small = qm.Budget(memory=256 * 2 ** 20)
    with pytest.raises(NotImplementedError, match=r"the batch model would need about 5\d\d MiB "
                                                  r"for its chain of dispatch records "
                                                  r"\(11,918 states, a band 2,451 wide\) "
                                                  r"\(budget 256 MiB\)"):
        qm.predict(CASE6, rate=0.974 * CASE6.capacity, fallback="raise", budget=small)
    nbytes, seconds, _ = chain.chain_work(78, 1, 4, 1, 2960, 398, 120, True)
    assert 256 * 2 ** 20 < nbytes < budget.MEMORY and seconds < budget.TIME


def test_case7_fixed_point_declines_within_its_budget():
    """The cavity model's fixed point charges each step; one that has not settled when the
    budget runs out declines with its progress (the default budget holds it near 20 s of
    estimated work, a minute or more before)."""
    with pytest.raises(NotImplementedError, match=r"fixed point had not settled after \d+ "
                                                  r"iterations .* \(budget 3 s\)"):
        qm.predict(CASE7, rate=0.7 * CASE7.capacity, fallback="raise", budget=qm.Budget(time=3))


def test_over_budget_model_declines_and_says_why():
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.25e-3), max_batch_size=8, max_queue_delay=1e-3)
    tiny = qm.Budget(memory=1024)
    with pytest.raises(NotImplementedError, match=r"budget 1 KiB"):
        qm.predict(node, rate=1500.0, fallback="raise", budget=tiny)
    # the same budget binds the simulation fallback: it names both and the run to ask for
    with pytest.raises(budget.OverBudget, match=r"batch model would need .* shortest "
                       r"simulation .* requests=\d+"):
        qm.predict(node, rate=1500.0, budget=tiny)
    # the default budget answers it with the model
    assert not qm.predict(node, rate=1500.0).accuracy.is_fallback


@pytest.mark.parametrize("spent", [19.0, 19.99])
def test_fallback_spends_what_the_model_left(monkeypatch, spent):
    """The model and the simulation fallback draw on one account, and the fallback's shortest
    sound run is held back from the model: a model that spent 19 of the 20 s and declined
    leaves one second, enough for a 1M-request run of one node (0.55 s estimated) but not for
    growing it fourfold; one that would spend 19.99 s is refused the work, so the fallback
    keeps the whole budget."""
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.25e-3), max_batch_size=8)

    def costly_model(*args):
        budget.charge(spent, "a costly model", "its work")
        raise budget.OverBudget("a costly model declined after its work")

    runs = []

    def counted(system, **kwargs):
        runs.append(kwargs["requests"])
        return simulate(system, **kwargs)

    simulate = sim_run.simulate
    monkeypatch.setattr(sys.modules["qmodel.stationary"], "_model", costly_model)
    monkeypatch.setattr(sim_run, "simulate", counted)
    r = qm.predict(node, rate=1500.0)
    assert r.accuracy.is_fallback and "costly model" in r.accuracy.fallback_reason
    if spent == 19.0:
        assert "declined after its work" in r.accuracy.fallback_reason
        assert runs == [1_000_000]           # growing fourfold would pass what is left
    else:
        assert "would take about 20 s of work for its work" in r.accuracy.fallback_reason
        assert runs[0] == 1_000_000


def test_lognormal_transform_spends_from_the_budget():
    """Each evaluation of the lognormal service transform (the M/G/1 Euler inversion's
    kernel) is charged: a cluster of many differently loaded lognormal nodes took a minute
    of quantile searches before; under a small budget the model runs out, and the fallback,
    held its shortest run, answers."""
    node = qm.Node(qm.ServiceTime.affine(9e-5, jitter=("lognormal", 1.6)))
    cluster = qm.Cluster(node, count=6, router="random", weights=[1, 2, 3, 4, 5, 6])
    rate = 0.3 * cluster.capacity
    with pytest.raises(budget.OverBudget, match=r"the lognormal service transform would take "
                                                r"about .* grid cells"):
        qm.predict(cluster, rate=rate, fallback="raise", budget=qm.Budget(time=0.5))
    r = qm.predict(cluster, rate=rate, budget=qm.Budget(time=0.5))
    assert r.accuracy.is_fallback
    assert "lognormal service transform" in r.accuracy.fallback_reason
    # with the default budget the model answers, and agrees with the fallback's simulation
    model = qm.predict(cluster, rate=rate, fallback="raise")
    lo, hi = r.ci(0.99)
    assert lo <= model.p99 * 1.02 and model.p99 * 0.98 <= hi


def test_identical_nodes_of_a_mixture_are_evaluated_once(monkeypatch):
    """A static router over repeated nodes solves each distinct node once, and the mixture
    evaluates each once per point (58 nodes of 3 kinds took 25 s of quantile searches)."""
    from qmodel.theory.classical.mg1 import MG1Latency

    node = qm.Node(qm.ServiceTime.affine(9e-5, jitter=("lognormal", 1.6)))
    cluster = qm.Cluster(node, count=20, router="random")
    r = qm.predict(cluster, rate=0.3 * cluster.capacity, fallback="raise")
    one = qm.predict(node, rate=0.3 * node.capacity, fallback="raise")
    calls = []
    sf = MG1Latency._sf
    monkeypatch.setattr(MG1Latency, "_sf", lambda self, t: calls.append(1) or sf(self, t))
    assert r.sf(one.p99) == pytest.approx(0.01, rel=1e-6)
    assert len(calls) == 1


def test_fallback_runs_fit_the_time_budget(monkeypatch):
    """Each fallback run is estimated before it starts (qmodel.sim.cost): a 64-node
    least-outstanding cluster's shortest sound run (8 replicas of the events engine) is
    estimated at over a second, so a 1 s budget refuses it with those numbers."""
    from qmodel.sim.cost import run_cost

    def no_model(*args):
        raise NotImplementedError("no model here")

    monkeypatch.setattr(sys.modules["qmodel.stationary"], "_model", no_model)
    cluster = qm.Cluster(qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8),
                         count=64, router="least_outstanding")
    rate = 0.9 * cluster.capacity
    cost = run_cost(cluster, qm.Poisson(rate), 1_000_000)
    assert cost.engine == "events" and cost.replicas == 8 and cost.seconds > 1
    with pytest.raises(budget.OverBudget, match=r"no model here; and the shortest simulation "
                       r".*budget left 1 s"):
        qm.predict(cluster, rate=rate, budget=qm.Budget(time=1.0))


def test_finite_queue_counts_lump_exactly(monkeypatch):
    """A finite queue cuts the arrival counts at max_queue_size + 2 (a long service tail kept
    thousands for a queue of a few dozen: 25 s for one node); the answer is that of the
    uncut counts."""
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.3e-3, jitter=("lognormal", 1.5)),
                   max_batch_size=8, max_queue_delay=1e-3, preferred_batch_sizes=(4, 8),
                   max_queue_size=12)
    rate = 1.05 * node.capacity
    counts = []
    during = blocking.arrivals_during_blocking

    def spy(*args):
        counts.append(during(*args))
        return counts[-1]

    monkeypatch.setattr(chain, "arrivals_during_blocking", spy)
    # the solver itself on its first lattice (a step of 45% of its median, which predict
    # refuses, and batch_node would solve again on a finer one): the same lattice both ways
    def solve():
        return solve_batch_node(Rules.of(node), Arrivals(rate), DEFAULT_RESOLUTION,
                                DEFAULT_TAIL, PASSES)

    cut = solve()
    assert max(c.J for c in counts) == 14 and any(c.folded for c in counts)
    monkeypatch.setattr(chain, "arrivals_during_blocking",
                        lambda *args: during(*args[:-1], 0))
    whole = solve()
    for p in (0.5, 0.9, 0.99, 0.999):
        assert cut.quantile(p) == pytest.approx(whole.quantile(p), rel=1e-9)
    assert cut.rejection_fraction == pytest.approx(whole.rejection_fraction, rel=1e-9)
    assert cut.mean_batch_size == pytest.approx(whole.mean_batch_size, rel=1e-9)


def test_least_outstanding_near_capacity_answers_or_declines():
    """Least outstanding over one-request nodes at load 0.999: the extras chain went through
    SuperLU, which took minutes or ended the process (out of memory inside SuperLU)."""
    node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=1)
    # load 0.999 lies beyond the family's measured 0.95: the model, extrapolated
    r = qm.predict(qm.Cluster(node, count=8, router="least_outstanding"),
                   rate=0.999 * 8 * node.capacity, fallback="raise", extrapolate=True)
    assert np.isfinite(r.p99) and r.p99 > r.p50 > 0
    # 128 nodes: 1.4 million states, declined from the estimate before anything is built
    with pytest.raises(NotImplementedError, match=r"would need about 1\.\d+ GiB for the "
                                                  r"busy-nodes/extras chain \([\d,]+ states, 51 "
                                                  r"busy levels\) \(budget 1 GiB\)"):
        jsq.waiting_probability(128, 0.999)
    # 2 nodes: the per-node count reaches thousands, and the sum of the waits behind them is
    # count x lattice work (a minute)
    with pytest.raises(NotImplementedError, match="waits behind up to"):
        qm.predict(qm.Cluster(node, count=2, router="least_outstanding"),
                   rate=0.999 * 2 * node.capacity, fallback="raise", extrapolate=True)


def test_waiting_probability_against_a_dense_solve():
    """The banded solve (extras first, one redundant equation replaced) against the same chain
    solved densely, small enough to write out here."""
    nodes, load = 3, 0.8
    extras = int(math.ceil(math.log(1e-12) / math.log(load))) + 2
    lam = load * nodes
    states = [(b, 0) for b in range(nodes + 1)] + [(b, e) for e in range(1, extras + 1)
                                                   for b in range(1, nodes + 1)]
    where = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for (b, e), i in where.items():
        if b < nodes:
            Q[i, where[(b + 1, e)]] += lam                 # an idle node takes the arrival
        elif e < extras:
            Q[i, where[(b, e + 1)]] += lam                 # all busy: it queues
        doubled = min(e, b)
        if doubled:
            Q[i, where[(b, e - 1)]] += doubled
        if b - doubled:
            Q[i, where[(b - 1, e if b - 1 >= 1 else 0)]] += b - doubled
    np.fill_diagonal(Q, -Q.sum(axis=1))
    A = np.vstack([Q.T, np.ones(len(states))])
    pi = np.linalg.lstsq(A, np.append(np.zeros(len(states)), 1.0), rcond=None)[0]
    busy = np.array([b for b, _ in states])
    assert jsq.waiting_probability(nodes, load) == pytest.approx(pi[busy == nodes].sum(),
                                                                 rel=1e-10)


def test_lindley_recursion_spends_from_the_budget_and_never_stops_unconverged():
    """Fuzz call predict-729 (three instances at load 0.9975 under renewal arrivals) ran
    Lindley's recursion to its 200,000-iteration cap for 34 s, uncharged, and would have
    answered unconverged at the cap. Each block of iterations is charged now, and the cap is
    an error."""
    from qmodel.theory.lindley import gig1

    node = qm.Node(qm.ServiceTime.table({1: 0.000672}), max_queue_delay=0.0061, instances=3)
    arrivals = qm.Renewal(0.9975 * node.capacity, scv=0.58)
    with pytest.raises(budget.OverBudget, match=r"Lindley's recursion \(GI/G/1 on a lattice\) "
                                                r"would take .* for iterations [\d,]+ to"):
        qm.predict(node, arrivals=arrivals, fallback="raise", budget=qm.Budget(time=0.5))
    service = qm.ServiceTime.affine(1.0, jitter="exponential")
    with pytest.raises(ArithmeticError, match=r"had not converged after 50 iterations"):
        gig1(0.99, service, arrival_scv=0.5, max_iterations=50)
    assert gig1(0.5, service, arrival_scv=0.5).p99 > 0        # converges well before the cap
