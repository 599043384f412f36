"""docs/outside: the outside rater's scripts import nothing of the package, so their arithmetic is checked here
against the package's own (two independent implementations must agree), and against hand-worked cases."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from alphazero_hpc.evaluate.elo import MatchScore, fit_ratings

OUTSIDE = Path(__file__).resolve().parent.parent / "docs" / "outside"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"outside_{name}", OUTSIDE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("wdl", [(50, 0, 50), (10, 0, 0), (0, 0, 7), (23, 1, 16), (5, 0, 16), (3, 30, 2)])
def test_outside_match_summary_gives_the_packages_interval(wdl):
    w, d, l = wdl
    outside = load("outside_match").summary(["W"] * w + ["D"] * d + ["L"] * l)
    ours = MatchScore(w, d, l)
    lo, hi = ours.elo_interval()
    assert outside["elo"] == ours.elo or (math.isinf(outside["elo"]) and math.isinf(ours.elo))
    # z = 1.96 there, 1.959964 here: a few hundredths of an Elo apart
    assert outside["elo_low"] == pytest.approx(lo, abs=0.05) and outside["elo_high"] == pytest.approx(hi, abs=0.05)


def test_pool_is_the_maximum_likelihood_rating_the_packages_fit_gives_against_pinned_opponents():
    pool = load("pool")
    # No draws: with draws the package weights each pair by the information they add (a quasi-likelihood) and the
    # points part by design; without, both are the plain logistic maximum likelihood.
    matches = [(23, 0, 17, 1054.0), (5, 0, 16, 1054.0), (27, 0, 13, 917.0)]
    ours = fit_ratings([("net", f"rung{i}", MatchScore(w, d, l)) for i, (w, d, l, _) in enumerate(matches)],
                       "rung0", 1054.0, prior_draws=0.0,
                       pinned={f"rung{i}": (opp, 0.0) for i, (_, _, _, opp) in enumerate(matches)})["net"]
    pooled = pool.pool(matches)
    assert ours.elo is not None and ours.low is not None and ours.high is not None
    assert pooled["rating"] == pytest.approx(ours.elo, abs=0.5)
    # The rungs exact: the package's interval comes from its fit's curvature, pool's from the games' observed spread
    # (the delta method); with two rungs of different scores the two differ by a few per cent.
    assert (pooled["rating_high"] - pooled["rating_low"]) == pytest.approx(ours.high - ours.low, rel=0.1)


def test_pool_of_one_match_is_that_match_and_symmetric_opponents_meet_in_the_middle():
    pool, outside = load("pool"), load("outside_match")
    one = pool.pool([(23, 1, 16, 1054.0)])
    assert one["rating"] == pytest.approx(1054.0 + outside.summary(["W"] * 23 + ["D"] + ["L"] * 16)["elo"], abs=0.01)
    # 10-0-10 against 1000 and against 1200: 1100 by symmetry; per-game variance 0.25, slope ln10/400 * 1/4 at an
    # even score only at 1100 +- 100 (E = 0.640 and 0.360): half-width 1.96 * sqrt(40 * 0.25) / (40 * slope * E(1-E)).
    two = pool.pool([(10, 0, 10, 1000.0), (10, 0, 10, 1200.0)])
    e = 1 / (1 + 10 ** (-100 / 400))
    half = 1.96 * math.sqrt(40 * 0.25) / (40 * math.log(10) / 400 * e * (1 - e))
    assert two["rating"] == pytest.approx(1100.0, abs=0.01) and two["rating_high"] - 1100 == pytest.approx(half, abs=0.01)
    assert pool.parse("5-0-16@1054") == (5, 0, 16, 1054.0)
    with pytest.raises(SystemExit, match="same result"):
        pool.pool([(0, 0, 21, 1054.0)])
