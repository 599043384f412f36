"""The calibrated scale: engine opponent specs, the fit with pinned rungs, the rating search against players of
known strength, the calibration plan, a real engine match on a clock, and azhpc evaluate --scale end to end."""

import json
import math
import os
import re
from typing import cast
from collections import Counter
from datetime import datetime

import numpy as np
import pytest

from alphazero_hpc.config import Config
from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.evaluate.elo import Z95, MatchScore, expected_score, fit_ratings, pair_residuals, rating_covariance
from alphazero_hpc.evaluate.engines import EnginePlayer, canonical_engine_name, parse_engine
from alphazero_hpc.evaluate.ledger import PlaySetup, read_ledger
from alphazero_hpc.evaluate.runner import MatchPlan, play_recorded
from alphazero_hpc.net.precision import cpu_model
from alphazero_hpc.evaluate.scale import (ANCHOR, RUNGS, CalibrationSpec, ScaleRung, calibration_plans, climb, exact,
                                          fit_scale, load_scale, read_table, render_table, rung_timed, scale_fit,
                                          counts_in_fit, shared_engine_block, write_fit)
from alphazero_hpc.store.paths import RunPaths

from .conftest import rated, run_cli, slurm_cli
from .test_evaluate import eval_run  # noqa: F401 - the fixture


# -- engine specs ----------------------------------------------------------------------------------------
def test_engine_specs_have_one_canonical_name():
    assert canonical_engine_name("stockfish:nodes=200,skill=0") == "stockfish:skill=0,nodes=200"  # as before
    assert canonical_engine_name("stockfish") == "stockfish:nodes=2000"
    assert canonical_engine_name("stockfish:tc=60+0.6,elo=1350") == ANCHOR
    assert canonical_engine_name("fairy-stockfish:depth=1,skill=-4") == "fairy-stockfish:skill=-4,depth=1"
    spec = parse_engine(ANCHOR)
    assert spec.tc == (60.0, 0.6) and spec.timed and spec.options()["UCI_Elo"] == 1350
    assert not parse_engine("fairy-stockfish:skill=-12,depth=1").timed
    assert parse_engine("stockfish:skill=0,movetime=100").timed
    for bad, why in [("stockfish:skill=-1", "0..20"), ("fairy-stockfish:skill=-21", "-20..20"),
                     ("stockfish:elo=1000", "1350..2850"), ("stockfish:tc=60+0.6,depth=1", "only limit"),
                     ("stockfish:tc=60", "not an option"), ("stockfish:skill=1,skill=2", "not an option"),
                     ("crafty:depth=1", "expected")]:
        with pytest.raises(AzhpcError, match=why):
            parse_engine(bad)
    for rung in RUNGS:  # every rung is its own canonical name, so ledgers match it
        assert rung in ("random", "greedy") or canonical_engine_name(rung) == rung


def test_the_config_accepts_the_rungs_as_opponents():
    from alphazero_hpc.config import EvalConfig

    EvalConfig(opponents=",".join(RUNGS))
    with pytest.raises(AzhpcError, match="eval.opponents"):
        EvalConfig(opponents="stockfish:tc=fast")


# -- the fit with pinned rungs ---------------------------------------------------------------------------
def test_pinned_players_fix_the_scale_and_their_uncertainty_widens_the_interval():
    matches = [("net", "a", MatchScore(60, 0, 40)), ("net", "b", MatchScore(30, 0, 70))]
    exact = fit_ratings(matches, "b", 1000.0, pinned={"a": (700.0, 0.0)})
    assert exact["a"].elo == 700.0 and exact["b"].elo == 1000.0
    net, exact_low, exact_high = rated(exact["net"])
    assert 700 < net < 1000
    loose = fit_ratings(matches, "b", 1000.0, pinned={"a": (700.0, 60.0)})
    assert loose["net"].elo == pytest.approx(net)
    _, loose_low, loose_high = rated(loose["net"])
    w_exact = exact_high - exact_low
    w_loose = loose_high - loose_low
    assert w_loose > w_exact + 10  # a's 60 Elo of uncertainty carries into the net's rating
    # Against a single pinned rung the net's rating moves one for one with it: sd adds in quadrature.
    one = fit_ratings([("net", "a", MatchScore(50, 0, 50))], "b", 1000.0, pinned={"a": (700.0, 60.0)})
    alone = fit_ratings([("net", "a", MatchScore(50, 0, 50))], "a", 700.0)
    _, alone_low, alone_high = rated(alone["net"])
    half_match = (alone_high - alone_low) / 2
    _, one_low, one_high = rated(one["net"])
    assert (one_high - one_low) / 2 == pytest.approx(math.hypot(half_match, 1.959964 * 60), rel=1e-3)


def sd(rating) -> float:
    """A fitted rating's standard deviation, from its 95% interval."""
    _, low, high = rated(rating)
    return (high - low) / (2 * Z95)


def test_rating_covariance_of_a_chain_adds_along_it():
    """anchor - a - b, adjacent matches only: b's error is a's plus the a-b match's, so cov(a, b) = var(a) and
    var(b) = var(a) + var(b | a exact); the diagonal is fit_ratings' own standard deviation."""
    matches = [("a", "anchor", MatchScore(30, 10, 60)), ("b", "a", MatchScore(55, 5, 40))]
    cov = rating_covariance(matches, "anchor", 1000.0)
    assert set(cov) == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}  # the anchor is exact
    assert cov[("a", "b")] == pytest.approx(cov[("b", "a")]) == pytest.approx(cov[("a", "a")], rel=1e-6)
    b_given_a = fit_ratings(matches, "a", 0.0)["b"]
    assert cov[("b", "b")] == pytest.approx(cov[("a", "a")] + sd(b_given_a) ** 2, rel=1e-6)
    fitted = fit_ratings(matches, "anchor", 1000.0)
    for p in "ab":
        assert math.sqrt(cov[(p, p)]) == pytest.approx(sd(fitted[p]), rel=1e-9)


def test_correlated_pins_move_a_player_rated_between_them_together():
    """A player rated against two pinned rungs: shifting both by d shifts it by d (only differences enter the
    likelihood), so with their errors fully correlated its calibration part is the rungs' whole sd; independent
    they partly cancel; anti-correlated (equal weights) they cancel."""
    matches = [("net", "a", MatchScore(60, 0, 40)), ("net", "b", MatchScore(40, 0, 60))]
    pinned = {"a": (900.0, 60.0), "b": (1100.0, 60.0)}
    exact = fit_ratings(matches, "anchor", 1350.0, pinned={"a": (900.0, 0.0), "b": (1100.0, 0.0)})["net"]
    games_var = sd(exact) ** 2

    def calibration_sd(corr: float) -> float:
        net = fit_ratings(matches, "anchor", 1350.0, pinned=pinned, pinned_cov={("a", "b"): corr * 60 * 60})["net"]
        assert net.elo == pytest.approx(exact.elo)
        return math.sqrt(max(sd(net) ** 2 - games_var, 0.0))

    assert calibration_sd(1.0) == pytest.approx(60.0, rel=1e-3)
    assert calibration_sd(0.0) == pytest.approx(60.0 / math.sqrt(2), rel=0.02)  # about equal weights
    assert calibration_sd(-1.0) < 5.0
    assert calibration_sd(0.5) == pytest.approx(60.0 * math.sqrt(0.75), rel=0.02)
    flipped = fit_ratings(matches, "anchor", 1350.0, pinned=pinned, pinned_cov={("b", "a"): 3600.0})["net"]  # either order
    assert sd(flipped) == pytest.approx(math.sqrt(games_var + 3600.0), rel=1e-3)
    with pytest.raises(ValueError, match="two covariances"):
        fit_ratings(matches, "anchor", 1350.0, pinned=pinned, pinned_cov={("a", "b"): 1.0, ("b", "a"): 2.0})
    with pytest.raises(ValueError, match="positive semi-definite"):  # a correlation beyond -1
        fit_ratings(matches, "anchor", 1350.0, pinned=pinned, pinned_cov={("a", "b"): -5000.0})


def test_the_shipped_scale_carries_its_rungs_covariances():
    """The table's pairs give back every rung's shipped interval (the same fit), and the rungs near 1000 correlate
    at 0.8 and more (0.88 since the anchor is tied to two rungs, 0.9 and more when it was one chain); taken as exact, the rungs carry none."""
    table = read_table()
    cov = rating_covariance([(m["first"], m["second"], MatchScore(m["wins"], m["draws"], m["losses"]))
                             for m in table["pairs"]], table["anchor"], table["anchor_elo"])
    rungs = load_scale()
    for r in rungs:
        if r.name != ANCHOR:
            assert Z95 * math.sqrt(cov[(r.name, r.name)]) == pytest.approx(Z95 * r.sd, abs=0.15), r.name
    by_name = {r.name: r for r in rungs}
    two, three = by_name["fairy-stockfish:skill=-2,depth=1"], by_name["fairy-stockfish:skill=-3,depth=1"]
    c = dict(two.cov)[three.name]
    assert c == pytest.approx(dict(three.cov)[two.name]) and 0.8 < c / (two.sd * three.sd) < 1.0
    assert not by_name[ANCHOR].cov and all(not r.cov for r in exact(rungs))


def test_intervals_with_the_rungs_calibration_cover_the_truth(tmp_path):
    """Simulated calibrations of a chain of rungs, each followed by a player rated against the two weakest: its 95%
    interval, the calibration carried with the rungs' covariances, covers its true rating about 95% of the time;
    treating the rungs' errors as independent (the diagonal alone) covers far less, since the player's interval is
    mostly calibration here (1000 games per rung for the player, 100 per calibration pair)."""
    rng = np.random.default_rng(11)
    truth = {"r0": 0.0, "r1": 200.0, "r2": 400.0, "r3": 600.0, "r4": 800.0}  # r4 the anchor
    names, player = list(truth), 100.0
    hits = {"covariance": 0, "diagonal": 0}
    reps = 400
    for _ in range(reps):
        calibration = [(hi, lo, MatchScore(w, 0, 100 - w)) for lo, hi in zip(names, names[1:])
                       for w in [int(rng.binomial(100, expected_score(truth[hi] - truth[lo])))]]
        pairs = [{"first": a, "second": b, "wins": m.wins, "draws": 0, "losses": m.losses} for a, b, m in calibration]
        fitted = fit_ratings(calibration, "r4", 800.0)
        table = {"schema": 1, "scale": "test", "anchor": "r4", "anchor_elo": 800.0, "anchor_note": "",
                 "rungs": [{"name": n, **dict(zip(("elo", "low", "high"), rated(fitted[n]))),
                            "timed": False, "clock": False, "games": 0} for n in names], "pairs": pairs}
        where = tmp_path / "t.json"
        where.write_text(json.dumps(table))
        rungs = load_scale(where)
        games = [("net", n, MatchScore(w, 0, 1000 - w))
                 for n in ("r0", "r1") for w in [int(rng.binomial(1000, expected_score(player - truth[n])))]]
        for how, used in (("covariance", rungs), ("diagonal", [ScaleRung(r.name, r.elo, r.sd, r.timed) for r in rungs])):
            net = scale_fit(games, used)["net"]
            _, low, high = rated(net)
            hits[how] += low <= player <= high
    assert 0.91 <= hits["covariance"] / reps <= 0.99, hits
    assert hits["diagonal"] / reps < hits["covariance"] / reps - 0.04, hits  # expected ~0.1 apart (+-0.015)


def test_pair_residuals_are_chance_on_a_transitive_ladder_and_flag_a_cycle():
    """On games drawn from the logistic model the residuals' squares sum to about the degrees of freedom (pairs less
    fitted players), averaged over simulated ladders; a cycle (a beats b, b beats c, c beats a, 70% each) puts every
    pair beyond 3 standard errors, which the fitted intervals do not show."""
    rng = np.random.default_rng(5)
    truth = {"a": 0.0, "b": 150.0, "c": 300.0, "d": 450.0}
    pairs = [("b", "a"), ("c", "b"), ("d", "c"), ("c", "a"), ("d", "b")]
    chi2 = []
    for _ in range(200):
        matches = [(x, y, MatchScore(w, 0, 200 - w)) for x, y in pairs
                   for w in [int(rng.binomial(200, expected_score(truth[x] - truth[y])))]]
        fitted = fit_ratings(matches, "a", 0.0)
        fits = pair_residuals(matches, {k: rated(v)[0] for k, v in fitted.items()})
        chi2.append(sum(f.z ** 2 for f in fits))
    assert 1.6 < float(np.mean(chi2)) < 2.4  # 5 pairs - 3 fitted players = 2 degrees of freedom
    cycle = [("a", "b", MatchScore(140, 0, 60)), ("b", "c", MatchScore(140, 0, 60)), ("c", "a", MatchScore(140, 0, 60))]
    fitted = fit_ratings(cycle, "a", 0.0)
    fits = pair_residuals(cycle, {k: rated(v)[0] for k, v in fitted.items()})
    assert len(fits) == 3 and all(abs(f.z) > 3 for f in fits) and all(abs(rated(fitted[k])[0]) < 1 for k in "bc")


# -- the rating search, against a player of known strength ----------------------------------------------
RUNG_ELOS = [0, 300, 600, 900, 1200, 1500]


def simulated(truth: float, seed: int):
    rng = np.random.default_rng(seed)

    def play_block(rung: ScaleRung, games: int, block_seed: int, first_opening: int) -> MatchScore:
        w = int(rng.binomial(games, expected_score(truth - rung.elo)))
        return MatchScore(w, 0, games - w)
    return play_block


@pytest.mark.parametrize("truth", [1000.0, 250.0])
def test_climb_brackets_and_rates_a_player_of_known_strength(truth):
    rungs = [ScaleRung(f"r{e}", float(e), 0.0 if e == 1500 else 25.0, False) for e in RUNG_ELOS]
    covered, games = 0, []
    for seed in range(30):
        r = climb("net", rungs, simulated(truth, seed), target=75.0, max_games=800)
        assert r.match_half <= 75.0 or r.games >= 800
        assert r.half >= r.match_half  # the rungs' uncertainty only widens it
        covered += r.low <= truth <= r.high
        games.append(r.games)
        most = max(r.games_per_rung, key=r.games_per_rung.__getitem__)  # most games against a rung next to the truth
        assert abs(float(most[1:]) - truth) <= 300, r
        far = [n for n in r.games_per_rung if abs(float(n[1:]) - truth) > 600]
        assert sum(r.games_per_rung[n] for n in far) <= 10  # a rung far away gets a probe at most
    assert covered >= 26, covered  # a 95% interval: 28.5 of 30 expected
    assert max(games) < 800
    capped = climb("net", rungs, simulated(truth, 0), target=75.0, probe=10, max_games=10)
    assert capped.games == 10 and len(capped.games_per_rung) == 1  # max_games stops the bisection too


def test_climb_continues_from_games_already_played():
    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    blocks = []
    sim = simulated(700.0, 1)

    def record(rung, games, seed, first_opening):
        blocks.append((rung.name, sim(rung, games, seed, first_opening)))
        return blocks[-1][1]
    first = climb("net", rungs, record, target=75.0)

    def never(*a):
        raise AssertionError("a block was played again")
    again = climb("net", rungs, never, played=blocks, target=75.0)
    assert (again.elo, again.games, again.games_per_rung) == (first.elo, first.games, first.games_per_rung)
    more = []

    def record_more(*a):
        more.append(a)
        return sim(*a)
    wider = climb("net", rungs, record_more, played=blocks, target=40.0)
    assert more and wider.games > first.games and wider.match_half <= 40.0


def per_block(truth: float, seed: int):
    """``simulated``, its draws fixed by each block (rung, seed) rather than by the order of calls: safe from threads."""
    def play_block(rung: ScaleRung, games: int, block_seed: int, first_opening: int) -> MatchScore:
        rng = np.random.default_rng((seed, int(rung.elo), block_seed))
        w = int(rng.binomial(games, expected_score(truth - rung.elo)))
        return MatchScore(w, 0, games - w)
    return play_block


def test_climb_with_jobs_plays_its_blocks_at_once_each_a_distinct_entry():
    """--jobs N: a round's blocks are in flight together (a barrier that N sequential calls would never pass), each
    with the seed and first opening it would have had one after another, and the rating still finds the truth."""
    import threading

    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    for jobs in (3, 8):
        sim, calls, lock = per_block(800.0, jobs), [], threading.Lock()
        barrier = threading.Barrier(min(jobs, len(rungs) - 2), timeout=10)

        def play_block(rung, games, seed, first_opening):
            with lock:
                calls.append((rung.name, games, seed, first_opening))
                first_round = len(calls) <= barrier.parties
            if first_round:
                barrier.wait()  # raises BrokenBarrierError unless the first round's probes all run at once
            return sim(rung, games, seed, first_opening)
        r = climb("net", rungs, play_block, target=75.0, max_games=400, jobs=jobs)
        assert len(calls) > barrier.parties and r.games == sum(g for _, g, _, _ in calls) < 400 + 20
        assert len({(name, seed) for name, _, seed, _ in calls}) == len(calls)  # no block twice
        for name in {c[0] for c in calls}:  # per rung: seeds 0, 1, 2...; each block opens where the last ended
            mine = sorted((seed, first, games) for n, games, seed, first in calls if n == name)
            assert [seed for seed, _, _ in mine] == list(range(len(mine)))
            assert [first for _, first, _ in mine] == [sum(g for _, _, g in mine[:i]) // 2 for i in range(len(mine))]
        assert r.low - 150 <= 800.0 <= r.high + 150 and r.match_half <= 75.0, r
        # the rounds after the bracket play what the interval still needs, not jobs blocks each: with 8 at once it
        # stops where one at a time would, give or take a round
        alone = climb("net", rungs, per_block(800.0, jobs), target=75.0, max_games=400)
        assert r.games <= alone.games + 4 * 20 + 10 * len(rungs), (r.games, alone.games)
    # a rating just short of its interval plays the block or two it needs, not a round of eight
    played = [(name, per_block(800.0, 9)(rungs[i], 20, seed, 0), seed) for i, name in ((3, "r900"), (2, "r600"))
              for seed in range(3)]
    near = climb("net", rungs, lambda *a: pytest.fail("nothing to play"), played=played, target=1000.0)
    calls = []

    def record_call(*a):
        calls.append(a[:2])
        return per_block(800.0, 9)(*a)
    for factor in (0.97, 0.85, 0.8, 0.75):  # a block or two, the second sometimes not needed once the first has ended
        calls.clear()
        said: list[str] = []
        climb("net", rungs, record_call, played=played, target=near.match_half * factor, jobs=8, echo=said.append)
        assert 1 <= len(calls) <= (2 if factor == 0.97 else 8), (factor, calls)
        assert not [line for line in said if line.endswith(": ")], said  # a line for each block started, no other


def test_climb_with_jobs_says_each_block_as_it_ends_not_when_its_round_does():
    """A round of blocks at hundreds of simulations per move takes many minutes: a block that ends early is on the
    screen at once. Here the first round's upper probe plays on until the lower one's line has been printed, which a
    round that printed its blocks only when all had ended would never allow (the wait would time out)."""
    import threading

    from alphazero_hpc.evaluate.scale import _spread

    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    low, high = (rungs[i] for i in _spread(0, len(rungs) - 1, 2))
    lines, said = [], threading.Event()

    def echo(line):
        lines.append(line)
        if line.startswith(f"  vs {low.name} ("):
            said.set()

    def play_block(rung, games, seed, first_opening):
        if rung is high and seed == 0:
            assert said.wait(10), lines  # the lower probe's line, while this block is still in play
        return per_block(800.0, 2)(rung, games, seed, first_opening)

    climb("net", rungs, play_block, target=75.0, max_games=400, echo=echo, jobs=2)
    assert lines[0] == f"  2 blocks at once: 10 games vs {low.name}, 10 games vs {high.name}", lines
    ended = [line for line in lines if line.startswith("  vs ")]
    # the upper probe's line comes after the lower one's, not necessarily next: the probe started when the lower one
    # ended may end first (threads are scheduled as the machine pleases)
    assert ended[0].startswith(f"  vs {low.name} ("), lines
    assert any(line.startswith(f"  vs {high.name} (") for line in ended[1:]), lines


def test_climb_with_jobs_probes_again_as_soon_as_one_probe_settles_the_bracket():
    """A probe that ends with a score that bounds the bracket alone (under half against the upper of two probes)
    starts the next probe inside the new bracket at once, while the other probe of its round plays on: here the lower
    probe plays on until that next probe has started, which rounds (the next probes only when both had ended) never
    allow (the wait would time out). The bracket still ends where the bisection ends it."""
    import threading

    from alphazero_hpc.evaluate.scale import _spread

    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    low, high = (rungs[i] for i in _spread(0, len(rungs) - 1, 2))  # r300, r900
    scripted = {low.name: MatchScore(10, 0, 0), high.name: MatchScore(2, 0, 8), "r600": MatchScore(7, 0, 3)}
    lock, next_probe = threading.Lock(), threading.Event()
    calls: list[tuple[str, int]] = []
    lines: list[str] = []

    def play_block(rung, games, seed, first_opening):
        with lock:
            calls.append((rung.name, games))
        if rung is low:
            assert next_probe.wait(30), calls  # in play until the probe inside the new bracket has started
        elif games == 10 and rung is not high:
            next_probe.set()
        return scripted[rung.name] if games == 10 else per_block(700.0, 5)(rung, games, seed, first_opening)

    r = climb("net", rungs, play_block, target=75.0, max_games=300, echo=lines.append, jobs=2)
    assert [c for c in calls if c[1] == 10] == [(low.name, 10), (high.name, 10), ("r600", 10)], calls
    assert lines[:3] == [f"  2 blocks at once: 10 games vs {low.name}, 10 games vs {high.name}",
                         f"  vs {high.name} ({high.elo:.0f}): +2 =0 -8", "  one more block (2 in play): 10 games vs r600"], lines
    # the bracket r600-r900, as the bisection finds it: every block after it against those two
    assert {n for n, games in calls if games == 20} <= {"r600", "r900"} and r.games == sum(g for _, g in calls), (calls, r)


def test_climb_with_jobs_starts_a_block_as_soon_as_one_ends_not_when_its_round_does():
    """After the bracket a block that ends frees its process for the next one at once: here the first block after
    the bracket plays on until a third has started, which rounds (the next blocks only when every block of the
    last had ended) never allow (the wait would time out); the rating still finds the truth, every block distinct."""
    import threading

    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    sim, lock, third = per_block(800.0, 2), threading.Lock(), threading.Event()
    calls: list[tuple[str, int, int, int]] = []
    lines: list[str] = []

    def play_block(rung, games, seed, first_opening):
        with lock:
            after = [c for c in calls if c[1] == 20]  # blocks after the bracket (its probes are 10 games)
            calls.append((rung.name, games, seed, first_opening))
        if games == 20 and not after:
            assert third.wait(30), calls  # the first block after the bracket, in play until a third has started
        elif games == 20 and len(after) >= 2:
            third.set()
        return sim(rung, games, seed, first_opening)

    r = climb("net", rungs, play_block, target=40.0, max_games=400, echo=lines.append, jobs=2)
    assert third.is_set() and len([c for c in calls if c[1] == 20]) >= 3, calls
    assert len({(name, seed) for name, _, seed, _ in calls}) == len(calls)
    assert r.low - 150 <= 800.0 <= r.high + 150 and r.games == sum(g for _, g, _, _ in calls), r
    assert any(line.startswith("  one more block (2 in play): 20 games vs ") for line in lines), lines
    assert not any(" 0 more blocks" in line or line.endswith(": ") for line in lines), lines  # a line only for a start


def test_climb_with_jobs_one_is_the_bisection_block_for_block():
    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    for truth in (100.0, 800.0, 1400.0):
        calls, busy = [], []

        def play_block(rung, games, seed, first_opening):
            busy.append(1)
            assert len(busy) == 1  # one block at a time
            calls.append((rung.name, games))
            score = per_block(truth, 3)(rung, games, seed, first_opening)
            busy.pop()
            return score
        climb("net", rungs, play_block, target=75.0, jobs=1)
        lo, hi, probes = 0, len(rungs) - 1, [c for c in calls if c[1] == 10]
        for name, _ in probes:  # each probe at the middle of what is left, left or right by its score
            mid = (lo + hi) // 2
            assert name == rungs[mid].name, (calls, lo, hi)
            s = per_block(truth, 3)(rungs[mid], 10, 0, 0).score
            lo, hi = (mid, hi) if s >= 0.5 else (lo, mid)
        assert hi - lo == 1 and calls[:len(probes)] == probes and all(g == 20 for _, g in calls[len(probes):])


def test_climb_after_a_cut_round_plays_past_the_highest_seed():
    """A round of blocks against one rung can end out of order (seed 1 in the ledger, seed 0 lost with a killed
    job): the rerun's next block takes seed 2, so it is a new ledger entry, not the one already there."""
    rungs = [ScaleRung(f"r{e}", float(e), 0.0, False) for e in RUNG_ELOS]
    calls = []
    played = [("r600", MatchScore(12, 0, 8), 0), ("r600", MatchScore(11, 1, 8), 1), ("r900", MatchScore(4, 0, 6), 0),
              ("r900", MatchScore(8, 2, 10), 2)]
    def record_call(*a):
        calls.append((a[0].name, *a[1:4]))
        return per_block(750.0, 1)(*a)
    climb("net", rungs, record_call, played=played, target=75.0, max_games=90)
    assert calls[0] == ("r900", 20, 3, 15), calls  # r900 has fewer games: the next block is its, past seed 2


# -- calibration -----------------------------------------------------------------------------------------
def test_calibration_plan_pairs_each_rung_with_its_neighbours_cheapest_first():
    plans = calibration_plans(CalibrationSpec(games=40, timed_games=20, block=20, timed_block=10))
    assert len({p.key for p in plans}) == len(plans)
    pairs = {(p.player, p.opponent) for p in plans}
    n = len(RUNGS)
    assert pairs == {(RUNGS[k + g], RUNGS[k]) for g in (1, 2) for k in range(n - g)}
    clock = [i for i, p in enumerate(plans) if ANCHOR in (p.player, p.opponent)]
    assert clock and min(clock) > max(i for i, p in enumerate(plans) if ANCHOR not in (p.player, p.opponent)
                                      and not (rung_timed(p.player) or rung_timed(p.opponent)))
    adjacent = [p for p in plans if (p.player, p.opponent) == (RUNGS[1], RUNGS[0])]
    assert sum(p.games for p in adjacent) == 40 and [p.openings for p in adjacent] == ["book:0", "book:10"]
    anchor_pair = [p for p in plans if (p.player, p.opponent) == (ANCHOR, RUNGS[-2])]
    assert sum(p.games for p in anchor_pair) == 20 and all(p.games == 10 for p in anchor_pair)


def test_calibration_tasks_split_the_blocks_still_missing_and_never_take_one_twice(tmp_path):
    """A resumed calibration splits what is left, not the whole plan: with every other block in the ledger, each of
    two tasks gets one of the two missing (strided over the whole plan, one task had both and the other none, as
    happened on 2026-12-04). A task whose share is done takes a block no other task has claimed; a claimed one is
    left to its owner, which takes it again when requeued; a new launch clears the claims."""
    from alphazero_hpc.evaluate import scale

    spec = CalibrationSpec(games=40, block=20, rungs=("random", "fairy-stockfish:skill=-12,depth=1", "greedy"))
    plans = calibration_plans(spec)
    assert len(plans) == 5
    paths = RunPaths(tmp_path / "cal")
    paths.eval_dir.mkdir(parents=True)
    paths.ledger.write_text("".join(json.dumps({"schema": 1, "key": p.key}) + "\n" for p in plans[::2]))
    missing = [p.key for p in plans[1::2]]
    first, second = scale.task_blocks(paths, spec, 0, 2), scale.task_blocks(paths, spec, 1, 2)
    assert next(first).key == missing[0] and next(second).key == missing[1]  # one each, at once
    assert list(second) == [] and list(first) == []  # each the other's claimed block left alone
    (requeued,) = scale.task_blocks(paths, spec, 0, 2)  # task 0 again (requeued, its block not played): its own
    assert requeued.key == missing[0]
    scale._prepare(paths.root, spec)  # a new launch with one task: every missing block is its
    assert [p.key for p in scale.task_blocks(paths, spec, 0, 1)] == missing
    lone = scale.task_blocks(paths, spec, 0, 1)
    assert next(lone).key == missing[0]
    paths.ledger.write_text(paths.ledger.read_text() + json.dumps({"schema": 1, "key": missing[1]}) + "\n")
    assert list(lone) == []  # a block that reached the ledger meanwhile (another launch's) is not played again


def test_every_fit_counts_a_block_by_one_rule():
    """counts_in_fit: the rules a block was scored under, and whether its engine shared one process among its
    games; a depth-1 rung (one answer a move, no hash carried) counts either way."""
    from alphazero_hpc.evaluate.ledger import LedgerEntry

    def block(**changes: object) -> LedgerEntry:
        fields = {"player": "gen:3", "opponent": "stockfish:skill=0,depth=1", "adjudicate_material": 0, **changes}
        return cast(LedgerEntry, {k: v for k, v in fields.items() if v is not None})

    assert counts_in_fit(block()) and not counts_in_fit(block(), adjudicate_material=2)
    assert counts_in_fit(block(adjudicate_material=2), adjudicate_material=2)
    assert not counts_in_fit(block(adjudicate_material=2))
    assert not counts_in_fit(block(opponent=ANCHOR)) and counts_in_fit(block(opponent=ANCHOR, engine_per_game=True))
    assert not counts_in_fit(block(opponent=ANCHOR, adjudicate_material=None))  # older blocks: rules 0


def test_engines_play_a_recorded_match_on_a_clock(tmp_path, engines):
    paths = RunPaths(tmp_path / "cal")
    clock = "stockfish:skill=0,tc=1+0.05"
    plan = MatchPlan(clock, "fairy-stockfish:skill=-12,depth=1", 2, PlaySetup(0), "book:3", 0, 80)
    entry, played = play_recorded(paths, Config(), plan, "cpu")
    assert played and entry["games"] == 2 and entry["generation"] is None
    assert entry["cpu"] == cpu_model() and entry["cpu"]  # where a timed rung's games were played
    # the clocked engine played each game in its own process: a block of its own identity, not one from before
    assert entry.get("engine_per_game") is True and entry["key"].endswith("|engine_per_game")
    assert not shared_engine_block(entry) and shared_engine_block({**entry, "engine_per_game": False})
    assert not shared_engine_block({**entry, "player": "fairy-stockfish:skill=-4,depth=1", "engine_per_game": False})
    assert len(entry["load_average"]) == 2  # overruns are Stockfish's to avoid; counting them is tested below
    pgn = (paths.root / entry["pgn"]).read_text()
    assert pgn.count("[Event ") == 2 and f'"{clock}"' in pgn and "eval/engines/" in entry["pgn"]
    again, played = play_recorded(paths, Config(), plan, "cpu")  # a rerun finds it in the ledger
    assert not played and again["finished"] == entry["finished"] and len(read_ledger(paths)) == 1
    # a clock player keeps one clock per game: time left shrinks within a game, a new game starts full
    player = EnginePlayer(parse_engine("stockfish:skill=0,tc=2+0"))
    try:
        import chess
        a, b = chess.Board(), chess.Board()
        player.choose([a])
        left_a = player._clocks[id(a)][1]
        assert 0 < left_a < 2.0 and id(b) not in player._clocks
        assert player._limit(b).white_clock == 2.0
    finally:
        player.close()


def test_a_plan_can_give_depth_1_engines_a_process_per_game(tmp_path, engines):
    """docs/calibration/depth1_check.py's control arm: the same depth-1 pair, each game in its own processes, is a
    block of its own identity; without the flag the pair shares one process per engine, as the ladder does."""
    from alphazero_hpc.evaluate.runner import make_player
    from alphazero_hpc.game.rules import Rules

    pair = ("stockfish:skill=0,depth=1", "fairy-stockfish:skill=-12,depth=1")
    shared = MatchPlan(*pair, 2, PlaySetup(0), "book:3", 0, 40)
    apart = MatchPlan(*pair, 2, PlaySetup(0), "book:3", 0, 40, every_engine_per_game=True)
    assert not shared.engine_per_game and apart.engine_per_game
    assert apart.key == shared.key + "|engine_per_game"
    paths = RunPaths(tmp_path / "cal")
    for plan in (shared, apart):
        player = make_player(pair[1], paths, Config(), plan, Rules(), "cpu")
        try:
            assert isinstance(player, EnginePlayer) and player.per_game is plan.every_engine_per_game
        finally:
            player.close()
    entry, played = play_recorded(paths, Config(), apart, "cpu")
    assert played and entry.get("engine_per_game") is True and not shared_engine_block(entry)
    entry, played = play_recorded(paths, Config(), shared, "cpu")  # a block of its own, not the one above
    assert played and "engine_per_game" not in entry and len(read_ledger(paths)) == 2


def test_a_move_that_overruns_the_clock_is_counted_and_the_clock_restarts_at_the_increment(engines, monkeypatch):
    import time

    import chess

    player = EnginePlayer(parse_engine("stockfish:skill=0,tc=0.05+0.01"))
    play = player.engine.play

    def slow(board, limit, game=None):  # an engine that answers after its whole clock is gone
        result = play(board, chess.engine.Limit(depth=1), game=game)
        time.sleep(0.1)
        return result
    monkeypatch.setattr(player.engine, "play", slow)
    try:
        board = chess.Board()
        player.choose([board])
        assert player.overruns == 1 and player._clocks[id(board)][1] == pytest.approx(0.01)
        player.choose([board])
        assert player.overruns == 2
    finally:
        player.close()


def test_an_engine_searching_beyond_depth_1_plays_each_game_in_its_own_process(engines):
    """Games played at once do not share one engine's hash and search state (EnginePlayer): a node-limited or timed
    engine gets a process per game, kept for that game, up to max_processes (then the one used longest ago starts
    the new game); an engine fixed at depth 1 plays every game from one process."""
    import chess

    player = EnginePlayer(parse_engine("stockfish:skill=0,nodes=50"), max_processes=3)
    shared = EnginePlayer(parse_engine("fairy-stockfish:skill=-4,depth=1"))
    try:
        boards = [chess.Board() for _ in range(3)]
        for _ in range(2):  # each game's moves come from the process that started it
            for board, move in zip(boards, player.choose(boards)):
                assert move is not None
                board.push(move)
        assert player.processes() == 3
        owners = {id(b): player._games[id(b)][2] for b in boards}
        assert len({id(e) for e in owners.values()}) == 3
        later = chess.Board()  # a fourth game with every process taken: the least recently used one, a new game
        oldest_key = player._games[id(boards[0])][1]
        player.choose([later])
        assert player.processes() == 3 and player._games[id(later)][2] is owners[id(boards[0])]
        assert id(boards[0]) not in player._games and player._games[id(later)][1] is not oldest_key
        shared.choose([chess.Board() for _ in range(4)])
        assert shared.processes() == 1 and not shared.per_game
    finally:
        player.close()
        shared.close()
    assert all(e.protocol.returncode.done() for e in owners.values())  # close() quits every process


def test_a_match_plays_no_more_games_at_once_than_a_per_game_engine_has_processes(tmp_path, engines, monkeypatch):
    """With more games than processes, games would pass processes to each other at every move (each a new game to
    the engine): play_recorded caps the games played at once at the per-game engine's max_processes (16)."""
    from alphazero_hpc.evaluate import runner

    seen: list[int] = []
    real = runner.play_match

    def spy(*args, **kwargs):
        seen.append(kwargs["parallel"])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "play_match", spy)
    paths = RunPaths(tmp_path / "cap")
    paths.eval_dir.mkdir(parents=True)
    plan = MatchPlan("stockfish:skill=0,nodes=20", "fairy-stockfish:skill=-12,depth=1", 18, PlaySetup(0), "book", 0, 6)
    entry, _ = play_recorded(paths, Config(), plan, "cpu")
    assert seen == [16] and entry["games"] == 18 and entry["engine_per_game"] is True
    plan = MatchPlan("stockfish:skill=0,depth=1", "fairy-stockfish:skill=-12,depth=1", 4, PlaySetup(0), "book", 0, 6)
    entry, _ = play_recorded(paths, Config(), plan, "cpu")
    assert seen[1] == Config().eval.parallel and "engine_per_game" not in entry  # depth 1: one process, no cap


def test_fit_scale_writes_a_table_the_rating_can_load(tmp_path):
    paths = RunPaths(tmp_path / "cal")
    from alphazero_hpc.evaluate.ledger import LedgerEntry, append_entry

    rng = np.random.default_rng(3)
    truth = {name: 1350 - 150 * (len(RUNGS) - 1 - i) for i, name in enumerate(RUNGS)}
    for k, (hi, lo) in enumerate([(RUNGS[i + 1], RUNGS[i]) for i in range(len(RUNGS) - 1)]):
        w = int(rng.binomial(200, expected_score(truth[hi] - truth[lo])))
        entry: dict[str, object] = {"key": f"k{k}", "player": hi, "opponent": lo, "wins": w, "draws": 0, "losses": 200 - w,
                 "finished": "2026-11-24T00:00:00", "load_average": [0.5, 0.7]}
        if k < len(RUNGS) - 2:  # the last block as from before the CPU was recorded
            entry.update({"cpu": "Test CPU A", "host": "a"} if k < 6 else {"cpu": "Test CPU B", "host": "b"})
        if hi == ANCHOR:  # the clocked anchor played each game in its own process
            entry["engine_per_game"] = True
        append_entry(paths, cast(LedgerEntry, entry))
    # a block of the anchor from before, one process answering every game, scored far off the truth: left out
    append_entry(paths, cast(LedgerEntry, {"key": "shared", "player": ANCHOR, "opponent": RUNGS[-2], "wins": 0,
                                           "draws": 0, "losses": 200, "finished": "2026-11-24T00:00:00",
                                           "load_average": [0.5, 0.7], "cpu": "Test CPU B", "host": "b"}))
    table = fit_scale(paths.root)
    assert table["provenance"]["shared_engine_blocks_left_out"] == 1 and "left out: 1 blocks" in render_table(
        write_fit(paths.root, table))
    where = write_fit(paths.root, table)
    rungs = load_scale(where)
    assert [r.name for r in rungs][-1] == ANCHOR and rungs[-1].elo == 1350.0 and rungs[-1].sd == 0.0
    for r in rungs:
        assert abs(r.elo - truth[r.name]) < 4 * max(r.sd, 1.0), r
    assert rungs[0].sd > rungs[-2].sd  # far from the anchor: less certain
    text = render_table(where)
    assert "(anchor)" in text and "a clock (CPU speed)" in text and "1320 +- 33" in text
    assert f"fit: chi-square 0.0 on 0 degrees of freedom over {len(RUNGS) - 1} pairs" in text, text  # a chain: exact
    assert table["provenance"]["load_average_range"] == [0.5, 0.7]
    # the command line prints the same table, under the option's one name (--scale-table, as for evaluate and elo)
    shown = run_cli("ladder", "show", "--scale-table", str(where))
    assert shown.returncode == 0 and shown.stdout.strip() == text.strip(), shown.stderr
    # the CPUs that played the blocks, not the one that fits them; blocks from before the field as such
    b = len(RUNGS) - 8  # the blocks between the first 6 and the last
    assert table["provenance"]["cpu"] == f"Test CPU A (6 blocks); Test CPU B ({b} blocks); cpu not recorded (1 block)"
    assert table["provenance"]["host"] == f"a (6 blocks); b ({b} blocks); host not recorded (1 block)"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": 99}))
    with pytest.raises(AzhpcError, match="schema"):
        load_scale(bad)


def small_table(tmp_path):
    """A scale of three cheap rungs (random, greedy, Fairy-Stockfish at -12) for end-to-end tests."""
    rungs = [("random", 0.0, 0.0), ("fairy-stockfish:skill=-12,depth=1", 400.0, 40.0), ("greedy", 800.0, 40.0)]
    table = {"schema": 1, "scale": "test scale", "anchor": "random", "anchor_elo": 0.0, "anchor_note": "test",
             "rungs": [{"name": n, "elo": e, "low": e - 1.96 * sd, "high": e + 1.96 * sd, "games": 100, "timed": False,
                        "clock": False} for n, e, sd in rungs],
             "provenance": {"games": 300, "blocks": 3, "first": "2026-11-24", "last": "2026-11-24", "cpu": "test",
                            "engines": {}}}
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(table))
    return path


def test_evaluate_scale_rates_a_network_and_elo_shows_it(eval_run, tmp_path, engines):  # noqa: F811
    table = small_table(tmp_path)
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table),
                "--interval", "300", "--max-games", "40", "--simulations", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "gen:1:" in r.stdout and "on the Stockfish 15.1 UCI_Elo scale [" in r.stdout and "1320 +- 33" in r.stdout
    entries = read_ledger(RunPaths(eval_run))
    assert entries and all(e["player"] == "gen:1" and e["adjudicate_material"] == 0 for e in entries)
    assert entries[0]["opponent"] == "fairy-stockfish:skill=-12,depth=1" and entries[0]["games"] == 10  # the probe
    again = run_cli("evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table),
                    "--interval", "300", "--max-games", "40", "--simulations", "2")
    assert again.returncode == 0 and len(read_ledger(RunPaths(eval_run))) == len(entries)  # nothing played twice
    assert f"{sum(e['games'] for e in entries)} games already in the ledger" in again.stdout
    elo = run_cli("elo", str(eval_run), "--scale-table", str(table), "--json")
    assert elo.returncode == 0, elo.stderr
    out = json.loads(elo.stdout)
    names = {x["name"]: x for x in out["ratings"]}
    # at 2 simulations, not the run's 16 (eval.simulations, else mcts.simulations): named so in the ladder
    assert out["scale"] and names["fairy-stockfish:skill=-12,depth=1"]["elo"] == 400.0 and names["gen:1@puct2"]["elo"] is not None
    assert not any(name.startswith("gen:1") and name != "gen:1@puct2" for name in names)
    table_out = run_cli("elo", str(eval_run), "--scale-table", str(table)).stdout.splitlines()
    rows = [line for line in table_out if line.split()[:1] and line.split()[0] in names]
    assert len(rows) == len(names) and len({line.index(" [") for line in rows}) == 1, table_out  # a 32-character rung name
    # The same network with another search (mcts.mate_in_one in the run's config) is a new player: nothing reused.
    config = eval_run / "config.yaml"
    assert config.read_text().count("  mate_in_one: false\n") == 1  # the run's config names every key
    config.write_text(config.read_text().replace("  mate_in_one: false\n", "  mate_in_one: true\n"))
    proven = run_cli("evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table),
                     "--interval", "300", "--max-games", "20", "--simulations", "2")
    assert proven.returncode == 0 and "0 games already in the ledger" in proven.stdout, proven.stderr
    new = read_ledger(RunPaths(eval_run))[len(entries):]
    assert new and all(e.get("mate_in_one") is True and e["key"].endswith("|mate_in_one") for e in new)
    # ... and so is the same network playing another search at the root (eval.algorithm; here --search, the run's
    # mcts.algorithm being puct): its entries name the search, and a rerun finds them
    gumbel = ["evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table), "--interval", "300",
              "--max-games", "20", "--simulations", "2", "--search", "gumbel"]
    searched = run_cli(*gumbel)
    assert searched.returncode == 0 and "0 games already in the ledger" in searched.stdout, searched.stderr
    assert "2 simulations per move, Gumbel" in searched.stdout
    more = read_ledger(RunPaths(eval_run))[len(entries) + len(new):]
    assert more and all(e.get("search") == "gumbel" and e["key"].endswith("|search=gumbel") for e in more)
    again = run_cli(*gumbel)
    assert f"{sum(e['games'] for e in more)} games already in the ledger" in again.stdout, again.stderr
    # ... and so is the same search with another prior temperature (--policy-temperature)
    warm = run_cli(*gumbel, "--policy-temperature", "2")
    assert warm.returncode == 0 and "0 games already in the ledger" in warm.stdout, warm.stderr
    assert "2 simulations per move, Gumbel, prior temperature 2)" in warm.stdout
    warmer = read_ledger(RunPaths(eval_run))[len(entries) + len(new) + len(more):]
    assert warmer and all(e.get("policy_temperature") == 2 and e["key"].endswith("|policy_temperature=2") for e in warmer)
    elo = run_cli("elo", str(eval_run), "--scale-table", str(table), "--json")  # a player apart from gen:1
    assert elo.returncode == 0, elo.stderr
    names = {x["name"]: x for x in json.loads(elo.stdout)["ratings"]}
    assert names["gen:1@gumbel2"]["games"] == sum(e["games"] for e in more)
    assert names["gen:1@gumbel2,T=2"]["games"] == sum(e["games"] for e in warmer)
    # the run's config proves mates now: its first matches (no proof) are a third player apart from the second's
    assert names["gen:1@puct2"]["games"] == sum(e["games"] for e in new)
    assert names["gen:1@puct2,nomate"]["games"] == sum(e["games"] for e in entries)


def test_a_killed_rating_leaves_no_pool_worker_behind():
    """A worker of ``--jobs`` whose parent was killed (SIGKILL: no clean-up runs) exits by itself, instead of
    finishing its block and then waiting for work forever."""
    import signal
    import subprocess
    import sys
    import time

    script = ("import os, time\nfrom alphazero_hpc.evaluate.runner import RecordingPool\n"
              "pool = RecordingPool(1)\nprint(pool._pool.submit(os.getpid).result(), flush=True)\ntime.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()

    def running() -> bool:
        try:
            with open(f"/proc/{worker}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    deadline = time.monotonic() + 20
    while running() and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = running()
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the pool worker outlived its killed parent"


def test_evaluate_scale_with_jobs_plays_blocks_in_processes_and_a_rerun_reuses_them(eval_run, tmp_path, engines):  # noqa: F811
    table = small_table(tmp_path)
    rate = ["evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table), "--interval", "60",
            "--max-games", "50", "--simulations", "2", "--jobs", "2"]
    r = run_cli(*rate)
    assert r.returncode == 0, r.stderr
    entries = read_ledger(RunPaths(eval_run))
    # the probe, then one round of two 20-game blocks (an interval of +-60 takes more than 30 games), each its own entry
    assert [e["games"] for e in entries] == [10, 20, 20] and len({e["key"] for e in entries}) == 3, entries
    # every game a line as it ends, named by its block, also from the worker processes (none silent until the end)
    said = Counter((m[1], int(m[2])) for m in re.finditer(r"^  vs (\S+) #(\d+): game \d+/\d+: gen:1 ", r.stdout, re.M))
    assert said == Counter({(e["opponent"], e["seed"]): e["games"] for e in entries}), r.stdout
    assert "  2 blocks at once: 20 games vs " in r.stdout
    # ... played at the same time: their spans overlap by more than the 1 s that `finished` is rounded to, which
    # two blocks played one after the other cannot show
    ends = [datetime.strptime(e["finished"], "%Y-%m-%dT%H:%M:%S%z").timestamp() for e in entries[1:]]
    spans = [(end - e["seconds"], end) for end, e in zip(ends, entries[1:])]
    assert min(end for _, end in spans) - max(start for start, _ in spans) >= 1.0, (spans, entries)
    assert "gen:1: " in r.stdout and "from its 50 games" in r.stdout
    again = run_cli(*rate)
    assert again.returncode == 0 and "50 games already in the ledger; 2 blocks at once" in again.stdout, again.stderr
    assert run_cli(*rate, "--quiet").stdout.count("\n") == 2  # the rating and the anchor's note
    assert len(read_ledger(RunPaths(eval_run))) == 3
    # a block that fails in its process (here: another player, at 3 simulations, whose probe needs the engine) is
    # one line, and the ledger keeps what it had
    lost = run_cli("evaluate", str(eval_run), "--generation", "1", "--scale", "--scale-table", str(table), "--simulations",
                   "3", "--jobs", "2", "--fairy-stockfish", str(tmp_path / "no-engine"))
    assert lost.returncode != 0 and "no-engine" in lost.stderr and "Traceback" not in lost.stderr, lost.stderr
    assert len(lost.stderr.strip().splitlines()) == 1, lost.stderr
    assert len(read_ledger(RunPaths(eval_run))) == 3
    alone = run_cli("evaluate", str(eval_run), "--generation", "1", "--jobs", "2")
    assert alone.returncode != 0 and "--jobs plays the blocks of a --scale rating" in alone.stderr


def test_the_evaluation_stage_rates_on_the_scale_and_a_rerun_continues(eval_run, tmp_path, engines, monkeypatch):  # noqa: F811
    from alphazero_hpc.evaluate import scale, stage
    from alphazero_hpc.store.runconfig import read_run_config

    table = small_table(tmp_path)
    monkeypatch.setattr(scale, "load_scale", lambda path=None, _load=scale.load_scale: _load(table))
    paths = RunPaths(eval_run)
    cfg = read_run_config(paths)
    cfg_text = paths.config.read_text().replace("scale: false", "scale: true").replace("scale_interval: 75.0", "scale_interval: 500.0")
    cfg_text = cfg_text.replace("scale_max_games: 600", "scale_max_games: 20").replace("opponents: previous,random", "opponents: ''")
    cfg_text = cfg_text.replace("scale_jobs: 1", "scale_jobs: 2")  # its blocks in two processes
    cfg_text = cfg_text.replace("\n  simulations: 0\n", "\n  simulations: 2\n")  # eval.simulations: quick games
    paths.config.write_text(cfg_text)
    assert read_run_config(paths).eval.scale and not cfg.eval.scale
    asked = []
    rate_on_scale = stage.rate_on_scale

    def rate_noting_jobs(*a, **k):
        asked.append(k["jobs"])
        return rate_on_scale(*a, **k)
    monkeypatch.setattr(stage, "rate_on_scale", rate_noting_jobs)
    progress = stage.evaluate_generation(eval_run, 1, device="cpu", echo=lambda s: None)
    assert progress.status == "done", progress.errors
    assert asked == [2]  # eval.scale_jobs reaches the rating
    (line,) = progress.results
    assert line.startswith("gen:1: ") and "UCI_Elo scale [" in line
    n = len(read_ledger(paths))
    assert n >= 1
    again = stage.evaluate_generation(eval_run, 1, device="cpu", echo=lambda s: None)
    assert again.results == progress.results and len(read_ledger(paths)) == n  # the ledger's blocks count


def test_slurm_calibration_array_plays_every_block_once(slurm_cluster, slurm_tmp, engines):
    """azhpc ladder calibrate --cluster slurm: an array of one-CPU tasks shares the blocks; every block lands in the
    ledger once, and submitting again when all are done plays nothing."""
    import time

    out = slurm_tmp / "cal"
    rungs = ["--rung", "random", "--rung", "fairy-stockfish:skill=-12,depth=1", "--rung", "greedy"]
    r = slurm_cli("ladder", "calibrate", str(out), "--cluster", "slurm", "--tasks", "2", "--games", "4", *rungs,
                "--time-min", "10")
    assert r.returncode == 0 and "calibration array" in r.stdout, r.stderr
    job = json.loads((out / "calibration-jobs.json").read_text())["jobs"][0]
    expected = {("fairy-stockfish:skill=-12,depth=1", "random"), ("greedy", "fairy-stockfish:skill=-12,depth=1"),
                ("greedy", "random")}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        entries = read_ledger(RunPaths(out)) if (out / "eval" / "ledger.jsonl").exists() else []
        if len(entries) >= len(expected):
            break
        time.sleep(2)
    assert {(e["player"], e["opponent"]) for e in entries} == expected and len(entries) == 3
    assert all(e["slurm_job_id"] and e["games"] == 20 for e in entries)
    import subprocess
    while time.monotonic() < deadline and subprocess.run(["squeue", "-h", "-j", job], capture_output=True,
                                                         text=True).stdout.strip():
        time.sleep(1)
    local = slurm_cli("ladder", "calibrate", str(out), "--tasks", "1", "--games", "4", *rungs)
    assert local.returncode == 0, local.stderr
    assert len(read_ledger(RunPaths(out))) == 3 and "3 blocks played" in local.stdout


def test_azhpc_elo_leaves_out_a_block_whose_engine_shared_one_process(tmp_path):
    """run_ladder (azhpc elo) fits a network's games against the rungs without its blocks against the anchor played
    before each game had its own process, and with those played since."""
    from alphazero_hpc.evaluate.ladder import run_ladder
    from alphazero_hpc.evaluate.ledger import LedgerEntry, append_entry

    paths = RunPaths(tmp_path / "run")
    paths.eval_dir.mkdir(parents=True)

    def block(key: str, opponent: str, w: int, d: int, l: int, **extra: object) -> None:
        append_entry(paths, cast(LedgerEntry, {"key": key, "player": "gen:1", "opponent": opponent, "wins": w,
                                               "draws": d, "losses": l, "games": w + d + l, **extra}))

    def rating() -> tuple[float, int]:
        fitted, entries, on_scale = run_ladder(paths.root, write=False)
        elo = next(r.elo for r in fitted if r.name == "gen:1")
        assert on_scale and elo is not None
        return elo, len(entries)

    block("a", "fairy-stockfish:skill=-2,depth=1", 12, 2, 6)
    alone = rating()
    block("b", ANCHOR, 9, 0, 1)  # the anchor of before, weakened: not counted
    assert rating() == alone
    block("c", ANCHOR, 1, 0, 9, engine_per_game=True)  # one game per process: counted
    assert rating()[1] == 2 and rating()[0] < alone[0]


def test_evaluate_scale_counts_a_networks_anchor_block_only_when_each_game_had_its_own_process(tmp_path):
    """rate_on_scale (azhpc evaluate --scale) continues from the network's blocks in the ledger, without those against
    the anchor played before each game had its own process (played again under their new key) and with those since."""
    from alphazero_hpc.evaluate.ledger import LedgerEntry, append_entry
    from alphazero_hpc.evaluate.scale import rate_on_scale

    cfg = Config()
    paths = RunPaths(tmp_path / "run")
    paths.eval_dir.mkdir(parents=True)
    setup = PlaySetup.of_config(cfg, 8)
    fields = {"simulations": setup.simulations, "mate_in_one": setup.mate_in_one, "search": setup.search,
              "leaf_capture_value": setup.leaf_capture_value, "policy_temperature": setup.policy_temperature,
              "tree_reuse": setup.tree_reuse, "seed": 0}

    def block(key: str, opponent: str, games: int, **extra: object) -> None:
        append_entry(paths, cast(LedgerEntry, {"key": key, "player": "gen:1", "opponent": opponent, "wins": games,
                                               "draws": 0, "losses": 0, "games": games, **fields, **extra}))

    class Started(Exception):
        pass

    def games_found() -> int:
        lines: list[str] = []

        def echo(line: str) -> None:  # the first line names the games found; stop before anything is played
            lines.append(line)
            raise Started

        with pytest.raises(Started):
            rate_on_scale(paths.root, cfg, 1, simulations=8, echo=echo)
        found = re.search(r"(\d+) games already in the ledger", lines[0])
        assert found, lines[0]
        return int(found.group(1))

    block("a", RUNGS[-3], 20)
    assert games_found() == 20
    block("b", ANCHOR, 10)  # the anchor of before, one process for every game: left out
    assert games_found() == 20
    block("c", ANCHOR, 10, engine_per_game=True)
    assert games_found() == 30
