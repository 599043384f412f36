"""docs/outside: the outside rater's scripts import nothing of the package, so their arithmetic is checked here
against the package's own (two independent implementations must agree), and against hand-worked cases."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import chess
import chess.engine
import chess.pgn
import pytest

from alphazero_hpc.evaluate.elo import MatchScore, fit_ratings
from alphazero_hpc.evaluate.match import book_openings

from .conftest import ROOT, folded, ledger_games, load_script

OUTSIDE = ROOT / "docs" / "outside"


def load(name: str):
    return load_script(OUTSIDE / f"{name}.py")


@pytest.mark.parametrize("wdl", [(50, 0, 50), (10, 0, 0), (0, 0, 7), (21, 0, 0), (0, 0, 11), (23, 1, 16), (5, 0, 16), (3, 30, 2)])
def test_outside_match_summary_gives_the_packages_interval(wdl):
    w, d, l = wdl
    outside = load("outside_match").summary(["W"] * w + ["D"] * d + ["L"] * l)
    ours = MatchScore(w, d, l)
    lo, hi = ours.elo_interval()
    assert outside["elo"] == ours.elo or (math.isinf(outside["elo"]) and math.isinf(ours.elo))
    # z = 1.96 there, 1.959964 here: a few hundredths of an Elo apart; an all-win (all-loss) match is unbounded above
    # (below) in both, not a large finite number from rounding
    for mine, theirs in ((outside["elo_low"], lo), (outside["elo_high"], hi)):
        assert mine == theirs if math.isinf(theirs) else mine == pytest.approx(theirs, abs=0.05)


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


@pytest.mark.parametrize("wdl", [(23, 1, 16), (10, 10, 8), (5, 0, 16)])
def test_pool_of_one_match_is_that_match_and_its_interval_is_the_packages_fit(wdl):
    """One opponent: the point is outside_match.py's, and the width is the package's fit's with no prior draws (its
    weight for draws is the same variance ratio as long as it stays under its cap of 4)."""
    pool, outside = load("pool"), load("outside_match")
    w, d, l = wdl
    one = pool.pool([(w, d, l, 1054.0)])
    assert one["rating"] == pytest.approx(1054.0 + outside.summary(["W"] * w + ["D"] * d + ["L"] * l)["elo"], abs=0.01)
    ours = fit_ratings([("net", "rung", MatchScore(w, d, l))], "rung", 1054.0, prior_draws=0.0)["net"]
    assert ours.low is not None and ours.high is not None
    assert one["rating_high"] - one["rating_low"] == pytest.approx(ours.high - ours.low, abs=0.05)


def test_pool_does_not_depend_on_how_games_are_split_and_disagreeing_matches_widen_it():
    pool = load("pool")
    split, merged = pool.pool([(5, 0, 16, 1054.0), (23, 1, 16, 1054.0)]), pool.pool([(28, 1, 32, 1054.0)])
    assert split == pytest.approx(merged)
    # all wins against 1000 and all losses against 1500 fit 1250 exactly, yet the games' spread is not zero
    far = pool.pool([(5, 0, 0, 1000.0), (0, 0, 5, 1500.0)])
    assert far["rating"] == pytest.approx(1250.0, abs=0.01) and far["rating_high"] - far["rating_low"] > 100


def test_pool_reproduces_the_documented_outside_rating_from_the_kept_summaries():
    """docs/evaluation-log.md ("Checked outside the match runner"): seed 13's network, 101 games against two rungs."""
    pool = load("pool")
    matches = [pool.parse(str(OUTSIDE / "seed13-fairy-stockfish-2b.json")),
               pool.parse(str(OUTSIDE / "seed13-fairy-stockfish-3.json")), pool.parse("5-0-16@1054")]
    assert matches == [(23, 1, 16, 1054.0), (21, 1, 18, 917.0), (5, 0, 16, 1054.0)]
    s = pool.pool(matches)
    assert (round(s["rating"]), round(s["rating_low"]), round(s["rating_high"]), s["games"]) == (997, 927, 1066, 101)


def kept_match(om, name: str) -> tuple[dict, list[str]]:
    """A match kept in docs/outside (NAME.json and NAME.pgn): its summary and its games' results from the network's
    side, after checking that the PGN holds games 1-40 of that one match, that the summary counts them, and that its
    rating and interval (the script's, with the opponent at its stated rating) are the games' own."""
    stem = OUTSIDE / name
    summary = json.loads(stem.with_suffix(".json").read_text())
    games = read_games(stem.with_suffix(".pgn"))
    assert sorted(int(g.headers["Round"]) for g in games) == list(range(1, 41))
    assert {g.headers["Match"] for g in games} == {summary["match"]}
    letters = [om.letter(g) for g in games]
    assert (summary["wins"], summary["draws"], summary["losses"]) == tuple(letters.count(x) for x in "WDL")
    again, base = om.summary(letters), summary["opponent_rating"]  # recomputed, not read back from the summary
    assert [round(again[k] + base, 6) for k in ("elo", "elo_low", "elo_high")] == \
        [round(summary[k], 6) for k in ("rating", "rating_low", "rating_high")]
    return summary, letters


def openings(name: str) -> dict[int, tuple[str, list[str]]]:
    """A kept match's games by round: who had White, and the first six plies (the random opening)."""
    return {int(g.headers["Round"]): (g.headers["White"], [m.uci() for m in g.mainline_moves()][:6])
            for g in read_games(OUTSIDE / f"{name}.pgn")}


def fit(pool, *scores: str) -> tuple[float, float, float, float]:
    """pool.py's rating, interval and half-width from scores written as pool.py reads them (W-D-L@RATING)."""
    r = pool.pool([pool.parse(x) for x in scores])
    return r["rating"], r["rating_low"], r["rating_high"], (r["rating_high"] - r["rating_low"]) / 2


def wdl(summary: dict, flip: bool = False) -> str:
    """A summary's score as W-D-L, or as L-D-W (the opponent's side) with ``flip``."""
    w, d, l = summary["wins"], summary["draws"], summary["losses"]
    return f"{l}-{d}-{w}" if flip else f"{w}-{d}-{l}"


def outside_chain(pool, anchor: dict, sup: dict) -> tuple[float, float]:
    """The supervised network through UCI_Elo 1600: that level placed by the anchor's games against it (``anchor``,
    the kept summary; the anchor at 1350), plus the network's games against it (``sup``); the two half-widths in
    quadrature."""
    placed, versus = fit(pool, f"{wdl(anchor, flip=True)}@1350"), fit(pool, f"{wdl(sup)}@0")
    return placed[0] + versus[0], math.hypot(placed[3], versus[3])


def test_seed16s_outside_match_at_1600_is_its_kept_games_and_the_documented_rating():
    """docs/evaluation-log.md ("Seed 16 outside at PUCT 1600"): the kept summary is the kept PGN's 40 games, all of one
    match, and pool.py puts them at the figures quoted, on the table the match was started against and on this one."""
    pool, name = load("pool"), "seed16-1600-fairy-stockfish-1"
    summary, _ = kept_match(load("outside_match"), name)
    started = pool.pool([pool.parse(str(OUTSIDE / f"{name}.json"))])
    now = pool.pool([pool.parse(f"{summary['wins']}-{summary['draws']}-{summary['losses']}@1034")])
    assert [round(started[k]) for k in ("rating", "rating_low", "rating_high")] == [1008, 900, 1116]
    assert [round(now[k]) for k in ("rating", "rating_low", "rating_high")] == [999, 891, 1107]
    assert "18-0-22 (0.45): 999 [891, 1107]" in folded("docs", "evaluation-log.md")


def test_the_supervised_network_s_outside_match_is_its_kept_games_and_the_documented_rating():
    """docs/evaluation.md ("Checked above the anchor, outside the package"): the kept summary of the supervised network
    against Stockfish UCI_Elo 1600 is the kept PGN's 40 games, all of one match, played at the documented settings,
    and its rating with that opponent at its nominal 1600 as the script printed it (its interval on the score scale;
    pool.py's point is the same) is the figure the docs quote."""
    pool, om = load("pool"), load("outside_match")
    summary, _ = kept_match(om, "sup-1600-stockfish-elo1600")
    score = wdl(summary)  # kept_match: the PGN's own count
    args = summary["args"]
    assert "docs/networks/supervised-d6-12k/models/gen-0000.pt --search puct --simulations 1600 " \
           "--policy-temperature 3 --tree-reuse" in args["engine"] and args["engine_nodes"] == 1600
    assert args["opponent_option"] == ["UCI_LimitStrength=true", "UCI_Elo=1600"] and args["opponent_tc"] == "60+0.6"
    assert summary["opponent_rating"] == 1600
    assert abs(fit(pool, f"{score}@1600")[0] - summary["rating"]) < 0.5  # kept_match: the interval is the games'
    figure = f"{summary['rating']:.0f} [{summary['rating_low']:.0f}, {summary['rating_high']:.0f}]"
    assert f"{score} ({summary['score']:.2f}), {figure}" in folded("docs", "evaluation.md")
    assert f"{score}, **{figure}**" in folded("README.md")


def test_the_anchor_against_uci_elo_1600_places_that_opponent_and_the_documented_chain_follows():
    """docs/evaluation.md ("Checked above the anchor, outside the package"): the anchor's kept 40 games against Stockfish
    UCI_Elo 1600 are one match at the anchor's settings, from the same openings, colours and clock as the supervised
    network's match against that opponent; the opponent's place on the scale (pool.py from the anchor's games, the
    anchor at 1350) and the supervised network's chained rating (its games against the opponent so placed, the two
    matches' intervals in quadrature) are the figures the docs quote."""
    pool, om = load("pool"), load("outside_match")
    anchor, _ = kept_match(om, "anchor-stockfish-elo1600")
    sup, _ = kept_match(om, "sup-1600-stockfish-elo1600")
    a = anchor["args"]
    assert a["engine"] == a["opponent"] == "stockfish" and a["engine_tc"] == a["opponent_tc"] == "60+0.6"
    assert a["engine_option"] == ["Threads=1", "Hash=16", "UCI_LimitStrength=true", "UCI_Elo=1350"]
    assert a["opponent_option"] == ["Threads=1", "Hash=16", "UCI_LimitStrength=true", "UCI_Elo=1600"]
    assert (a["seed"], a["random_plies"]) == (sup["args"]["seed"], sup["args"]["random_plies"])
    assert openings("anchor-stockfish-elo1600") == openings("sup-1600-stockfish-elo1600")  # round by round

    placed = fit(pool, f"{wdl(anchor, flip=True)}@1350")
    chain, half = outside_chain(pool, anchor, sup)
    text, readme = folded("docs", "evaluation.md"), folded("README.md")
    score = f"{wdl(anchor)} ({anchor['score']:.2f})"
    assert f"scored **{score}: `UCI_Elo` 1600 is {-anchor['elo']:.0f} above the anchor here" in text
    assert f"{placed[0]:.0f} [{placed[1]:.0f}, {placed[2]:.0f}] with the anchor at 1350" in text
    figure = f"**{chain:.0f} [{chain - half:.0f}, {chain + half:.0f}]**"
    assert figure in text and figure in readme
    assert f"{placed[0]:.0f} [{placed[1]:.0f}, {placed[2]:.0f}], the outside chain" in readme

    # the two figures it is set against: the network's own games against the anchor in its ledger (games only) and
    # the scale's figure that the docs quote (recompute_runs.py's SUPERVISED_1600), each gap with its combined 95%
    games = ledger_games("supervised-d6-12k", 1600)["stockfish:elo=1350,tc=60+0.6"]
    direct = fit(pool, f"{games.wins}-{games.draws}-{games.losses}@1350")
    scale = [float(x) for x in re.findall(r"\d+", load_script(ROOT / "docs" / "calibration" / "recompute_runs.py")
                                          .SUPERVISED_1600[0])]
    gap1, half1 = direct[0] - chain, math.hypot(half, direct[3])
    gap2, half2 = scale[0] - chain, math.hypot(half, (scale[2] - scale[1]) / 2)
    assert f"{direct[0]:.0f} [{direct[1]:.0f}, {direct[2]:.0f}]" in text
    for page in (text, readme):
        assert f"{gap1:.0f} below the" in page and f"(+-{half1:.0f})" in page
        assert f"{gap2:.0f} below the scale's {scale[0]:.0f}" in page and f"(+-{half2:.0f})" in page


def test_the_supervised_network_against_the_anchor_outside_repeats_its_ledger_and_the_documented_gaps_follow():
    """docs/evaluation.md ("The network against the anchor itself, outside"): the supervised network's kept 40 games
    against the anchor are one match at the documented settings, from the openings and colours of its match against
    UCI_Elo 1600; pool.py's rating from them is the script's point and the figure the docs quote; pooled with the
    ledger's games against the anchor they give the quoted figure; the outside chain's gap to each (with its combined
    95%) is the one quoted; and the log's colour split and game lengths are the PGN's."""
    pool, om = load("pool"), load("outside_match")
    summary, letters = kept_match(om, "sup-1600-anchor")
    sup, _ = kept_match(om, "sup-1600-stockfish-elo1600")
    anchor, _ = kept_match(om, "anchor-stockfish-elo1600")
    args, base = summary["args"], summary["opponent_rating"]
    assert args["engine"] == sup["args"]["engine"] and args["engine_nodes"] == 1600
    assert args["opponent_option"] == ["Threads=1", "Hash=16", "UCI_LimitStrength=true", "UCI_Elo=1350"]
    assert args["opponent_tc"] == "60+0.6" and base == 1350
    assert openings("sup-1600-anchor") == openings("sup-1600-stockfish-elo1600")

    outside = fit(pool, f"{wdl(summary)}@{base:g}")
    assert abs(outside[0] - summary["rating"]) < 0.5
    games = ledger_games("supervised-d6-12k", 1600)["stockfish:elo=1350,tc=60+0.6"]
    both = fit(pool, f"{wdl(summary)}@{base:g}", f"{games.wins}-{games.draws}-{games.losses}@{base:g}")
    chain, chain_half = outside_chain(pool, anchor, sup)
    text, readme, log = folded("docs", "evaluation.md"), folded("README.md"), folded("docs", "evaluation-log.md")
    figure = f"{outside[0]:.0f} [{outside[1]:.0f}, {outside[2]:.0f}]"
    assert f"**{wdl(summary)} ({summary['score']:.3f}), {figure}** with the anchor at 1350" in text
    assert f"{wdl(summary)}, **{figure}**" in readme and f"{wdl(summary)}, {figure}" in readme
    assert f"{wdl(summary)}, {figure} with the anchor at 1350" in folded("docs", "networks", "README.md")
    script = f"the script printed [{summary['rating_low']:.0f}, {summary['rating_high']:.0f}]"
    assert script in text and script in log
    total = [summary[k] + getattr(games, k) for k in ("wins", "draws", "losses")]
    pooled = f"{both[0]:.0f} [{both[1]:.0f}, {both[2]:.0f}]"
    assert f"{'-'.join(map(str, total))} in {sum(total)} games, give {pooled}" in text
    assert f"pooled, {'-'.join(map(str, total))}, {pooled}" in log
    gaps = (f"{outside[0] - chain:.0f} below this match, inside the combined 95% (+-{math.hypot(outside[3], chain_half):.0f}), "
            f"and {both[0] - chain:.0f} below the 120")
    assert gaps in text and gaps in log
    assert f"the chain is {outside[0] - chain:.0f} below that (+-{math.hypot(outside[3], chain_half):.0f} at 95%) and " \
           f"{both[0] - chain:.0f} below the 120 games against the anchor pooled (+-{math.hypot(both[3], chain_half):.0f})" in readme
    # the log's colour split and lengths
    split = {True: [0, 0, 0], False: [0, 0, 0]}
    plies = []
    for g, letter in zip(read_games(OUTSIDE / "sup-1600-anchor.pgn"), letters):
        split[g.headers["White"] == "network"]["WDL".index(letter)] += 1
        plies.append(len(list(g.mainline_moves())))
    assert f"{sum(plies) / len(plies):.0f} plies on average ({min(plies)}-{max(plies)}); as White " \
           f"{'-'.join(map(str, split[True]))}, as Black {'-'.join(map(str, split[False]))}" in log


def test_pool_symmetric_opponents_meet_in_the_middle_and_bad_input_is_one_line():
    pool = load("pool")
    # 10-0-10 against 1000 and against 1200: 1100 by symmetry, where E = 0.640 and 0.360; each match's squared
    # residuals about E sum to 10 ((1 - E)^2 + E^2), the slope is ln10/400 * E(1 - E) a game: half-width
    # 1.96 * sqrt(20 ((1 - E)^2 + E^2)) / (40 ln10/400 E(1 - E)) over the 40 games.
    two = pool.pool([(10, 0, 10, 1000.0), (10, 0, 10, 1200.0)])
    e = 1 / (1 + 10 ** (-100 / 400))
    half = 1.96 * math.sqrt(20 * ((1 - e) ** 2 + e ** 2)) / (40 * math.log(10) / 400 * e * (1 - e))
    assert two["rating"] == pytest.approx(1100.0, abs=0.01) and two["rating_high"] - 1100 == pytest.approx(half, abs=0.01)
    assert pool.parse("5-0-16@1054") == (5, 0, 16, 1054.0)
    with pytest.raises(SystemExit, match="same result"):
        pool.pool([(0, 0, 21, 1054.0)])
    for bad in ("0-0-0@1000", "5-0-x@1000", "5-0-16", "-1-0-3@900", "5-0-16@nan"):
        with pytest.raises(SystemExit):
            pool.parse(bad)


def test_outside_match_reads_the_packages_book_to_the_same_positions():
    """--book: outside_match.py reads a book file with python-chess alone; on the package's own book it gives the
    positions that the package's book_openings gives, each index cycling through the book as the games do."""
    outside = load("outside_match")
    book = book_openings()
    path = Path(__file__).resolve().parent.parent / "alphazero_hpc" / "evaluate" / "openings.txt"
    for index in range(len(book) + 3):
        board = chess.Board()
        for move in book[index % len(book)].moves:
            board.push(move)
        assert outside.book_opening(index, str(path)).fen() == board.fen(), index


def test_outside_match_draws_a_repetition_once_it_has_happened_not_when_it_could():
    """A position seen twice, the side to move able to make it three times: python-chess's claim_draw=True already
    calls that a draw (it ended hundreds of engine games early); the script's ending, like cutechess-cli and the
    package's chess_ending, waits for the third occurrence. Fifty moves likewise, and --max-plies ends a game."""
    from alphazero_hpc.game.rules import chess_ending

    ending = load("outside_match").ending
    board = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1"]:  # Black's Ng8 would repeat the start a third time
        board.push_san(san)
    assert board.is_game_over(claim_draw=True) and not board.is_repetition(3)
    assert ending(board, 400) is None and chess_ending(board, 400) is None
    board.push_san("Ng8")
    assert ending(board, 400) == ("1/2-1/2", "threefold_repetition") and chess_ending(board, 400) is not None
    fifty = chess.Board("8/8/8/4k3/8/8/2R5/4K3 w - - 99 80")
    assert ending(fifty, 400) is None
    fifty.push_san("Rc3")
    assert ending(fifty, 400) == ("1/2-1/2", "fifty_moves")
    assert ending(chess.Board(), 0) == ("1/2-1/2", "0 plies")
    mate = chess.Board()
    for san in ["f3", "e5", "g4", "Qh4#"]:
        mate.push_san(san)
    assert ending(mate, 400) == ("0-1", "checkmate")


class _Clock:
    """The script's time module in a test: monotonic() is what the engines below have spent, nothing else."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _SlowEngine:
    """An engine stand-in: answers its first legal move after ``seconds`` on ``clock``, recording every limit."""

    def __init__(self, seconds: float, clock: _Clock) -> None:
        self.seconds, self.clock = seconds, clock
        self.limits: list[chess.engine.Limit] = []

    def play(self, board, limit, game=None):
        self.limits.append(limit)
        self.clock.now += self.seconds
        return type("Answer", (), {"move": next(iter(board.legal_moves))})()


def test_outside_match_clock_gives_remaining_time_and_a_flag_loses(monkeypatch):
    """--engine-tc: the clocked side gets its remaining time and increment with each go (the time its answer took
    taken off, the increment added) and loses when its time runs out; the untimed opponent keeps its own limit."""
    import argparse

    outside = load("outside_match")
    clock = _Clock()
    monkeypatch.setattr(outside, "time", clock)
    args = argparse.Namespace(book=None, random_plies=0, seed=1, engine_depth=0, engine_nodes=0, engine_movetime=1.0,
                              opponent_depth=1, opponent_nodes=0, max_plies=400, engine_tc="1+0.5", opponent_tc=None)
    net, opp = _SlowEngine(0.75, clock), _SlowEngine(3.0, clock)  # 0.75 a move against 0.5 added: 0.25 lost a move
    index, letter, game = outside.play_game(0, args, net, opp)  # index 0: the network White
    assert letter == "L" and game.headers["Result"] == "0-1" and game.headers["Termination"] == "time forfeit"
    assert game.headers["TimeControl"] == "network=1+0.5"
    assert [(limit.white_clock, limit.black_clock, limit.white_inc) for limit in net.limits] == [
        (1.0, 1.0, 0.5), (0.75, 0.75, 0.5), (0.5, 0.5, 0.5)]  # the 3rd took 0.75 of 0.5 left: the increment comes after
    assert len(opp.limits) == 2 and all(limit.depth == 1 and limit.white_clock is None for limit in opp.limits)
    assert len(list(game.mainline_moves())) == 4  # the move that overran is not played
    args.engine_tc, args.opponent_tc = None, "1+0.5"  # the other side on the clock: as Black it flags, the network wins
    net.limits.clear()
    opp.limits.clear()
    index, letter, game = outside.play_game(1, args, net, opp)  # index 1: the network Black
    assert letter == "W" and game.headers["Result"] == "0-1" and game.headers["Termination"] == "time forfeit"
    assert all(limit.time == 1.0 and limit.white_clock is None for limit in net.limits)
    assert [limit.white_clock for limit in opp.limits] == [1.0]  # 3 s on its first move: flagged at once
    args.opponent_tc = None  # no clock at all: the game runs to its end by the rules
    index, letter, game = outside.play_game(2, args, net, opp)
    assert game.headers["Termination"] != "time forfeit" and "TimeControl" not in game.headers


def test_rung_pairs_difference_and_chain_agree_with_the_packages_fit():
    """rung_pairs.py (standard library) against the package: a pair's Elo difference and interval are MatchScore's,
    and its chain fit, without draws (where both are the plain logistic maximum likelihood), is fit_ratings' with
    the same rung pinned, points and intervals."""
    rp = load("rung_pairs")
    for w, d, l in [(246, 44, 110), (350, 14, 36), (30, 0, 70)]:
        elo, se = rp.diff(w, d, l)
        lo, hi = MatchScore(w, d, l).elo_interval()
        assert elo == pytest.approx(MatchScore(w, d, l).elo, abs=1e-9)
        assert 1.96 * se == pytest.approx((hi - lo) / 2, rel=0.05)  # symmetric in Elo there, mapped from the score here
    pairs = [("a", "b", 60, 100), ("b", "c", 70, 100), ("a", "c", 80, 100)]
    mine = rp.chain(pairs, "a", 1000.0)
    theirs = fit_ratings([(x, y, MatchScore(int(p), 0, int(n - p))) for x, y, p, n in pairs], "a", 1000.0, prior_draws=0.0)
    for player in "bc":
        elo, se = mine[player]
        r = theirs[player]
        assert r.elo is not None and r.low is not None and r.high is not None
        assert elo == pytest.approx(r.elo, abs=0.01)
        assert 1.959964 * se == pytest.approx((r.high - r.low) / 2, rel=1e-3)
    assert mine["a"] == (1000.0, 0.0)


def test_rung_pairs_names_an_outside_match_as_the_package_names_its_rungs():
    """rung_pairs.py reads outside_match.py's options back into the scale's rung names, the package's canonical ones:
    a skill level at a depth, and the anchor (UCI_Elo on a clock), so that its games join the table's pairs."""
    from alphazero_hpc.evaluate.engines import canonical_engine_name
    from alphazero_hpc.evaluate.scale import ANCHOR

    rp = load("rung_pairs")
    anchor = rp.rung("stockfish", ["Threads=1", "UCI_LimitStrength=true", "UCI_Elo=1350"], 0, "60+0.6")
    assert anchor == canonical_engine_name("stockfish:tc=60+0.6,elo=1350") == ANCHOR
    assert rp.rung("/usr/games/fairy-stockfish", ["Skill Level=-2"], 1) == canonical_engine_name("fairy-stockfish:depth=1,skill=-2")
    with pytest.raises(SystemExit):
        rp.rung("stockfish", ["UCI_Elo=1350"], 0, "60+0.6")  # UCI_Elo without UCI_LimitStrength: full strength


def test_outside_match_resumes_from_its_pgn_and_refuses_another_matchs(tmp_path, engines):
    """Every finished game is in --pgn at once; the same command again plays only the games missing from it (a larger
    --games extends the match, a smaller one counts only its first games), and a PGN of a match with other settings is one line and exit 2, the file untouched."""
    import subprocess
    import sys

    pgn, js = tmp_path / "m.pgn", tmp_path / "m.json"

    def match(games: int, seed: int = 5) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(OUTSIDE / "outside_match.py"), "--engine", engines["stockfish"], "--engine-depth", "1",
             "--engine-option", "Skill Level=0", "--opponent", engines["fairy-stockfish"], "--opponent-option",
             "Skill Level=-4", "--max-plies", "12", "--random-plies", "2", "--seed", str(seed), "--games", str(games),
             "--jobs", "2", "--pgn", str(pgn), "--json", str(js)], capture_output=True, text=True, timeout=300)

    first = match(3)
    assert first.returncode == 0, first.stdout + first.stderr
    games = pgn.read_text()
    rounds = [g.headers["Round"] for g in read_games(pgn)]
    assert sorted(rounds, key=int) == ["1", "2", "3"] and json.loads(js.read_text())["resumed"] == 0
    second = match(5)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "3 games of this match already played; playing the 2 missing" in second.stdout
    assert sorted(line.split(":")[0] for line in second.stdout.splitlines() if line.startswith("game ")) == [
        "game 4", "game 5"]  # only the two missing played
    assert pgn.read_text().startswith(games.rstrip("\n"))  # the first three games kept as they were
    summary = json.loads(js.read_text())
    assert [g.headers["Round"] for g in read_games(pgn)] == ["1", "2", "3", "4", "5"]
    assert (summary["games"], summary["resumed"]) == (5, 3)
    assert summary["wins"] + summary["draws"] + summary["losses"] == 5
    before = pgn.read_bytes()
    fewer = match(2)  # a smaller --games counts its first two games only; the others stay in the PGN
    assert fewer.returncode == 0, fewer.stdout + fewer.stderr
    assert "3 more games of this match (beyond --games 2) stay in it" in fewer.stdout
    assert json.loads(js.read_text())["games"] == 2 and pgn.read_bytes() == before
    other = match(6, seed=6)
    assert other.returncode == 2 and "from a match with other settings" in other.stderr, other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and pgn.read_bytes() == before


def read_games(path: Path) -> list[chess.pgn.Game]:
    out = []
    with open(path) as f:
        while (game := chess.pgn.read_game(f)) is not None:
            out.append(game)
    return out
