"""Anytime-valid means by betting and the worst-arm search (issue 50; station/analysis/anytime/):
checked against laws whose mean or quantile the test knows in closed form, over seeded
sequences looked at after every value (the use a stop rule makes of them), including a
dependent sequence whose conditional mean alone is constant; the documented cost of bounding a
rare rate from above holds; the search returns the truly worst arm at the stated error and never
separates two equal ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from station.analysis.anytime.betting import MeanSequence, values_to_bound_below
from station.analysis.anytime.elimination import WorstArmSearch


def slack(alpha: float, trials: int) -> float:
    """Three binomial standard errors: the seeded estimate of an error rate against alpha."""
    return 3 * math.sqrt(alpha * (1 - alpha) / trials)


def ever_missed(draws: np.ndarray, truth: float, alpha: float) -> bool:
    cs = MeanSequence(alpha)
    for x in draws:
        lo, hi = cs.add(float(x))
        if not lo <= truth <= hi:
            return True
    return False


def test_the_mean_of_independent_values_is_covered_at_every_time():
    rng = np.random.default_rng(7)
    alpha, trials = 0.1, 150
    misses = sum(ever_missed(rng.beta(2, 5, 300), 2 / 7, alpha) for _ in range(trials))
    assert misses / trials <= alpha + slack(alpha, trials)


def test_a_dependent_sequence_with_a_constant_conditional_mean_is_covered():
    """Each value's spread follows the one before it (a machine whose noise comes in phases),
    its conditional mean stays 0.3: a martingale difference sequence, not independent."""
    rng = np.random.default_rng(8)
    alpha, trials = 0.1, 150
    misses = 0
    for _ in range(trials):
        x, draws = 0.3, []
        for _ in range(300):
            half = 0.05 if abs(x - 0.3) < 0.1 else 0.3  # calm after calm, wild after wild
            x = 0.3 + (half if rng.random() < 0.5 else -half)
            draws.append(x)
        misses += ever_missed(np.array(draws), 0.3, alpha)
    assert misses / trials <= alpha + slack(alpha, trials)


def test_the_interval_narrows_and_holds_a_bernoulli_rate():
    rng = np.random.default_rng(9)
    cs = MeanSequence(0.05)
    for x in rng.random(3000) < 0.02:
        cs.add(float(x))
    lo, hi = cs.interval
    assert lo <= 0.02 <= hi and hi - lo < 0.02


@pytest.mark.parametrize("epsilon", [1e-2, 1e-3])
def test_a_rare_rate_is_bounded_from_above_no_sooner_than_the_docs_say(epsilon):
    alpha = 0.05
    floor = values_to_bound_below(epsilon, alpha)
    cs = MeanSequence(alpha)
    under = next(t for t in range(1, 3 * floor) if cs.add(0.0)[1] < epsilon)
    assert floor <= under <= 1.5 * floor


def test_values_outside_the_unit_interval_are_refused():
    cs = MeanSequence(0.05)
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            cs.add(bad)


def search(laws: list, p: float, alpha: float, rng: np.random.Generator,
           budget: int) -> WorstArmSearch:
    arms = tuple(f"load{k}" for k in range(len(laws)))
    s = WorstArmSearch(arms, p, alpha, t_opt=40)
    while not s.done and s.rounds < budget:
        s.add_round({a: float(laws[arms.index(a)].rvs(random_state=rng)) for a in s.survivors})
    return s


def test_the_worst_load_is_found_at_the_stated_error():
    """Four loads, their run figures normal with means 0, 0.4, 0.8 and 1.6 (the last the worst
    median); 60 seeded searches of at most 150 rounds: the worst is never dropped in more than
    alpha of them, and most end with it alone."""
    laws = [stats.norm(mu, 1) for mu in (0.0, 0.4, 0.8, 1.6)]
    rng = np.random.default_rng(10)
    alpha, trials = 0.1, 60
    results = [search(laws, 0.5, alpha, rng, 150) for _ in range(trials)]
    wrong = sum("load3" in s.eliminated for s in results)
    assert wrong / trials <= alpha + slack(alpha, trials)
    alone = sum(s.survivors == ("load3",) for s in results)
    assert alone >= 0.7 * trials
    # an arm dropped in a round is measured no more: its interval's count stops there
    for s in results:
        for arm, when in s.eliminated.items():
            assert s.sequences[arm].t == when


def test_two_equal_worst_loads_are_never_told_apart():
    laws = [stats.norm(0, 1), stats.norm(1, 1), stats.norm(1, 1)]
    rng = np.random.default_rng(11)
    alpha, trials = 0.1, 40
    results = [search(laws, 0.5, alpha, rng, 120) for _ in range(trials)]
    split = sum(not {"load1", "load2"} <= set(s.survivors) for s in results)
    assert split / trials <= alpha + slack(alpha, trials)
    assert sum("load0" in s.eliminated for s in results) >= 0.7 * trials


def test_a_round_must_measure_exactly_the_survivors():
    s = WorstArmSearch(("a", "b"), 0.5, 0.05)
    with pytest.raises(ValueError, match="every survivor once"):
        s.add_round({"a": 1.0})
    with pytest.raises(ValueError, match="two or more distinct arms"):
        WorstArmSearch(("a",), 0.5, 0.05)


def test_an_arm_whose_units_change_is_called_contradicted_and_drops_no_other():
    """Arm b's runs jump from 50 to 1000 after round 10 (its units not alike): its intervals stop
    overlapping; the search says so, keeps a and c (equal), and takes further rounds."""
    s = WorstArmSearch(("a", "b", "c"), 0.5, 0.1, t_opt=10)
    for r in range(120):
        s.add_round({arm: (1000.0 if arm == "b" and r >= 10 else 50.0 + 0.001 * r)
                     for arm in s.survivors})
    assert "b" in s.contradicted and not s.done
    assert {"a", "c"} <= set(s.survivors)
