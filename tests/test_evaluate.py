"""Evaluation: Elo maths against values worked out by hand, the match runner with players of known
strength, the ladder, the ledger, and azhpc evaluate / azhpc elo end to end on tiny networks."""

import io
import json
import math

import chess
import chess.pgn
import numpy as np
import pytest

from alphazero_hpc.net.checkpoint import save_checkpoint
from alphazero_hpc.errors import AzhpcError, RunDirError
from alphazero_hpc.game.rules import chess_ending
from alphazero_hpc.evaluate.elo import MatchScore, elo_from_score, expected_score, fit_ratings
from alphazero_hpc.evaluate.ledger import PlaySetup, append_entry, read_ledger
from alphazero_hpc.evaluate.match import book_openings, openings_from_spec, play_match
from alphazero_hpc.evaluate.players import GreedyPlayer, RandomPlayer
from alphazero_hpc.net.model import build_model
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.runconfig import resolve_run_config

from .conftest import TINY, rated, run_cli


# -- Elo maths -------------------------------------------------------------------------------------------
def test_elo_of_a_score_and_back():
    assert elo_from_score(0.5) == 0.0
    assert elo_from_score(0.75) == pytest.approx(400 * math.log10(3))  # 190.85: 3 points for every 1
    assert elo_from_score(0.25) == pytest.approx(-400 * math.log10(3))
    assert elo_from_score(1.0) == math.inf and elo_from_score(0.0) == -math.inf
    for d in (-350.0, -20.0, 0.0, 120.0):
        assert elo_from_score(expected_score(d)) == pytest.approx(d)


def test_interval_and_los_known_values():
    # 50-0-50: per-game sd 0.5, se 0.05; score 0.5 +- 1.96 * 0.05 -> Elo +-400 log10(0.598/0.402) = +-68.99.
    lo, hi = MatchScore(50, 0, 50).elo_interval()
    assert lo == pytest.approx(-68.99, abs=0.02) and hi == pytest.approx(68.99, abs=0.02)
    # Draws shrink the trinomial variance: 25-50-25 has per-game sd sqrt(0.125), so the interval is narrower.
    lo2, hi2 = MatchScore(25, 50, 25).elo_interval()
    half = 1.959964 * math.sqrt(0.125 / 100)
    assert hi2 == pytest.approx(400 * math.log10((0.5 + half) / (0.5 - half)), rel=1e-4) and lo2 == pytest.approx(-hi2)
    assert 0 < hi2 < hi
    # LOS = Phi((W - L) / sqrt(W + L)): 60-40 is two standard deviations -> 0.97725.
    assert MatchScore(60, 0, 40).los == pytest.approx(0.97725, abs=1e-5)
    assert MatchScore(60, 500, 40).los == pytest.approx(0.97725, abs=1e-5)  # draws carry no information
    assert MatchScore(3, 4, 3).los == 0.5
    # 10-0-0: the trinomial variance is 0, Wilson's lower bound is n / (n + z^2) = 0.72247 -> +166.2 Elo.
    s = MatchScore(10, 0, 0)
    lo, hi = s.elo_interval()
    assert lo == pytest.approx(166.2, abs=0.1) and hi == math.inf
    assert s.summary()["elo"] is None and s.summary()["elo_low"] == pytest.approx(166.2, abs=0.1)


def test_ladder_recovers_known_ratings():
    rng = np.random.default_rng(7)
    truth = {"a": 0.0, "b": 150.0, "c": 300.0, "d": 600.0}
    matches = []
    for x, y in [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]:
        n = 600
        w = int(rng.binomial(n, expected_score(truth[x] - truth[y])))
        matches.append((x, y, MatchScore(w, 0, n - w)))
    matches.append(("e", "f", MatchScore(3, 0, 1)))  # no chain of matches to the anchor
    r = fit_ratings(matches, anchor="a")
    assert r["a"].elo == 0.0
    for name in ("b", "c", "d"):
        _, low, high = rated(r[name])
        assert low < truth[name] < high, (name, r[name])
    (b, b_low, b_high), (c, _, _), (d, d_low, d_high) = (rated(r[name]) for name in ("b", "c", "d"))
    assert b < c < d
    assert d_high - d_low > b_high - b_low  # d is one long chain away: less certain
    assert r["e"].elo is None and r["f"].elo is None


def test_ladder_gives_a_perfect_score_a_finite_rating():
    elo, low, _ = rated(fit_ratings([("strong", "random", MatchScore(20, 0, 0))], anchor="random")["strong"])
    assert math.isfinite(elo) and low > 100


# -- match runner with players of known strength ---------------------------------------------------------
class Resigner:
    """At its first move of a game (the first after ``book_plies``) resigns with probability p; it never
    resigns later and otherwise plays random legal moves. So its results are known in advance."""

    def __init__(self, p: float, seed: int, name: str, book_plies: int) -> None:
        self.p, self.name, self.book_plies = p, name, book_plies
        self.rng = np.random.default_rng(seed)

    def choose(self, boards):
        out = []
        for b in boards:
            first_move = len(b.move_stack) <= self.book_plies + 1
            legal = list(b.legal_moves)
            out.append(None if first_move and self.rng.random() < self.p else legal[int(self.rng.integers(len(legal)))])
        return out

    def close(self):
        pass


def score_of(outcomes):
    pts = [o.first_points for o in outcomes]
    return MatchScore(pts.count(1.0), pts.count(0.5), pts.count(0.0))


def test_a_player_that_always_wins_comes_out_far_ahead():
    outcomes = play_match(RandomPlayer(1), Resigner(1.0, 2, "loser", 6), 20, book_openings(), max_plies=40)
    s = score_of(outcomes)
    assert (s.wins, s.draws, s.losses) == (20, 0, 0)
    assert s.elo_interval()[0] > 150 and s.los > 0.999
    assert all(o.termination == "resignation" for o in outcomes)
    assert [o.first_is_white for o in outcomes] == [i % 2 == 0 for i in range(20)]  # colours alternate


def test_a_block_says_that_its_games_move_before_any_ends(tmp_path, monkeypatch):
    """A block of 16 games against the anchor's clock ends its first game only after ~25 minutes: between games' ends
    the runner prints a line at most every PROGRESS_EVERY_S (games over, in play, moves played), none more often."""
    from alphazero_hpc.config import Config
    from alphazero_hpc.evaluate import runner
    plan = runner.MatchPlan("greedy", "random", 4, PlaySetup(0), "book:3", 0, 30)
    quiet: list[str] = []
    runner.play_recorded(RunPaths(tmp_path / "a"), Config(), plan, "cpu", echo=quiet.append)
    assert len(quiet) == 4 and not any("in play" in line for line in quiet)  # a fast block: its games' lines only
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)
    lines: list[str] = []
    entry, played = runner.play_recorded(RunPaths(tmp_path / "b"), Config(), plan, "cpu", echo=lines.append)
    beats = [line for line in lines if "in play" in line]
    assert played and lines[0] in beats and "0/4 games over, 4 in play, " in lines[0]
    moves = [int(line.split(", ")[-1].split()[0]) for line in beats]
    assert moves == sorted(moves) and moves[0] > 0
    assert "4/4 games over, 0 in play" in beats[-1] and abs(moves[-1] - 4 * entry["mean_plies"]) <= 0.2


def test_match_score_matches_known_strength():
    # B resigns at once in half of its games, otherwise the game is a draw at max_plies (random moves rarely
    # end 8 plies): A's expected score is 0.5 * 1 + 0.5 * 0.5 = 0.75, i.e. +190.8 Elo.
    outcomes = play_match(RandomPlayer(3, "A"), Resigner(0.5, 4, "B", 2), 300, openings_from_spec("random:2", 300, 5),
                          max_plies=10, parallel=50)
    s = score_of(outcomes)
    lo, hi = s.elo_interval()
    assert lo < 400 * math.log10(3) < hi, (s, lo, hi)
    assert 0.6 < s.score < 0.9


def test_openings_vary_games_and_are_played_with_both_colours():
    outcomes = play_match(GreedyPlayer(1), RandomPlayer(2), 8, book_openings(), max_plies=30)
    games = []
    for o in outcomes:
        game = chess.pgn.read_game(io.StringIO(o.pgn))
        assert game is not None, o.pgn
        games.append(game)
    openings = [g.headers["Opening"] for g in games]
    assert openings[0] == openings[1] != openings[2] == openings[3]
    assert [g.headers["White"] for g in games[:2]] == ["greedy", "random"]
    first_moves = {tuple(m.uci() for m in list(g.mainline_moves())[:6]) for g in games}
    assert len(first_moves) == 4
    with pytest.raises(AzhpcError, match="random:K"):
        openings_from_spec("randomly", 8, 0)


def test_material_adjudication_scores_draws_by_rule_only():
    board = chess.Board("7k/8/8/8/8/8/8/KQ6 w - - 0 1")
    for _ in range(2):
        for san in ("Ka2", "Kg8", "Ka1", "Kh8"):
            board.push_san(san)
    assert chess_ending(board, 400) == ("1/2-1/2", "threefold repetition")
    assert chess_ending(board, 400, adjudicate_material=9) == ("1-0", "material adjudication (threefold repetition)")
    assert chess_ending(board, 400, adjudicate_material=10) == ("1/2-1/2", "threefold repetition")
    stalemate = chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")
    assert chess_ending(stalemate, 400, adjudicate_material=1) == ("1/2-1/2", "stalemate")  # a rule of chess stays


def test_greedy_beats_random():
    s = score_of(play_match(GreedyPlayer(1), RandomPlayer(2), 24, book_openings(), max_plies=300))
    assert s.elo_interval()[0] > 0 and s.los > 0.99, s


# -- ledger ----------------------------------------------------------------------------------------------
def test_ledger_appends_once_per_key_and_reports_a_bad_line(tmp_path):
    run = RunPaths(tmp_path)
    ledger = run.ledger
    assert append_entry(run, {"key": "k1", "wins": 1})
    assert not append_entry(run, {"key": "k1", "wins": 2})
    assert append_entry(run, {"key": "k2", "wins": 3})
    assert [e["wins"] for e in read_ledger(run)] == [1, 3]
    assert not [p for p in ledger.parent.iterdir() if p.name.endswith(".tmp")]
    with open(ledger, "a") as fh:
        fh.write('{"key": "k3", "wins"\n')
    with pytest.raises(RunDirError, match="line 3 is not JSON"):
        read_ledger(run)


# -- azhpc evaluate / elo end to end ---------------------------------------------------------------------
@pytest.fixture
def eval_run(tmp_path):
    """A run folder with two random tiny networks (generations 0 and 1)."""
    run = tmp_path / "run"
    paths = RunPaths(run)
    cfg = resolve_run_config(paths, TINY)
    for g in (0, 1):
        save_checkpoint(paths.model(g), build_model(cfg.model, seed=g), generation=g)
    return run


FAST = ["--games", "4", "--simulations", "4", "--max-plies", "24"]


def test_evaluate_cli_records_matches_and_fits_a_ladder(eval_run):
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "previous", "--opponent", "random",
                "--opponent", "greedy", *FAST)
    assert r.returncode == 0, r.stderr
    entries = read_ledger(RunPaths(eval_run))
    assert [(e["player"], e["opponent"]) for e in entries] == [("gen:1", "gen:0"), ("gen:1", "random"), ("gen:1", "greedy")]
    for e in entries:
        assert e["wins"] + e["draws"] + e["losses"] == 4
        games = (eval_run / e["pgn"]).read_text().count("[Event ")
        assert games == 4
    assert "gen:1 vs random: +" in r.stdout and "LOS" in r.stdout and "game 4/4" in r.stdout
    again = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "random", *FAST)
    assert again.returncode == 0 and "already in the ledger" in again.stdout
    assert len(read_ledger(RunPaths(eval_run))) == 3
    plot = run_cli("plot", str(eval_run))  # every network at 4 simulations, none as the run plays: says so
    assert plot.returncode == 0 and "shows no network: gen:0@puct4, gen:1@puct4 played with another" in plot.stdout, plot.stderr
    # the same opponent and seed at the run's own simulations (eval.simulations, else mcts.simulations: 16 here):
    # another match, with its own PGN file, and in the ladder another player than the network at 4 simulations
    own = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "random", "--games", "2", "--max-plies", "24")
    assert own.returncode == 0 and "16 sims/move" in own.stdout, own.stderr
    entries = read_ledger(RunPaths(eval_run))
    assert len({e["pgn"] for e in entries}) == 4
    assert [(eval_run / e["pgn"]).read_text().count("[Event ") for e in entries] == [4, 4, 4, 2]
    ladder = run_cli("elo", str(eval_run), "--json")
    assert ladder.returncode == 0, ladder.stderr
    names = {r["name"]: r for r in json.loads(ladder.stdout)["ratings"]}
    assert set(names) == {"gen:0@puct4", "gen:1@puct4", "gen:1", "random", "greedy"} and names["random"]["elo"] == 0.0
    assert names["gen:1"]["games"] == 2 and names["gen:1@puct4"]["games"] == 12
    plot = run_cli("plot", str(eval_run))
    assert plot.returncode == 0 and "shows no network" not in plot.stdout, plot.stderr
    assert json.loads((eval_run / "eval" / "ratings.json").read_text())["anchor"] == "random"


def test_evaluate_errors_are_one_line(eval_run, tmp_path):
    r = run_cli("evaluate", str(eval_run), "--generation", "5", "--opponent", "random", *FAST)
    assert r.returncode == 1 and "models/gen-0005.pt not found" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("evaluate", str(eval_run), "--generation", "0", "--opponent", "previous", *FAST)
    assert r.returncode == 1 and "generation 0 has no previous network" in r.stderr
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "stockfish", "--opponent", "random",
                "--stockfish", str(tmp_path / "no-such-stockfish"), *FAST)
    assert r.returncode == 1 and "apt-get install stockfish" in r.stderr
    assert "gen:1 vs random" in r.stdout  # the other opponents still play
    r = run_cli("elo", str(tmp_path))
    assert r.returncode == 1 and "no evaluations" in r.stderr


def test_eval_algorithm_is_the_search_a_network_plays_with(eval_run):
    """eval.algorithm overrides mcts.algorithm for the network's matches only (self-play keeps mcts), and names
    itself in the match's ledger key where it differs; 'same' is the run's own search."""
    import dataclasses

    from alphazero_hpc.config import PlayAlgorithm
    from alphazero_hpc.evaluate.players import NetPlayer
    from alphazero_hpc.evaluate.runner import MatchPlan, make_player
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.store.runconfig import read_run_config

    cfg = read_run_config(RunPaths(eval_run))
    assert cfg.mcts.algorithm == "puct" and cfg.eval.algorithm == "same" and cfg.play_search == ""
    cases: list[tuple[PlayAlgorithm, str]] = [("same", ""), ("puct", ""), ("gumbel", "gumbel")]
    for algorithm, search in cases:
        c = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, algorithm=algorithm))
        plan = MatchPlan("gen:1", "random", 2, PlaySetup(4, search=c.play_search), "book", 0, 24)
        player = make_player("gen:1", RunPaths(eval_run), c, plan, search_rules(24), "cpu")
        assert isinstance(player, NetPlayer), player
        assert c.play_search == search and player.mcts.algorithm == (search or "puct") and c.mcts.algorithm == "puct"
        assert plan.key.endswith(f"|search={search}") == bool(search)
    with pytest.raises(Exception, match="eval.algorithm"):
        dataclasses.replace(cfg.eval, algorithm="alphabeta")  # type: ignore[arg-type]  # not an algorithm: refused
    # a Gumbel run whose root value is Gumbel's own (mcts.gumbel_root_value=improved) still plays under PUCT
    gumbel = dataclasses.replace(cfg, mcts=dataclasses.replace(cfg.mcts, algorithm="gumbel", gumbel_root_value="improved"),
                                 eval=dataclasses.replace(cfg.eval, algorithm="puct"))
    assert gumbel.play_mcts().algorithm == "puct" and gumbel.play_mcts().gumbel_root_value == "visits"


def test_eval_policy_temperature_is_the_prior_a_network_plays_with_and_keys_its_matches(eval_run):
    """eval.policy_temperature (evaluate/uci --policy-temperature) sets the prior's temperature of the network's
    matches only (0: mcts's; self-play keeps mcts), and a temperature other than 1 names itself in the ledger key,
    the ledger entry and the player's tag, so games at two temperatures are never one player's."""
    import dataclasses

    from alphazero_hpc.evaluate.ledger import search_tag
    from alphazero_hpc.evaluate.players import NetPlayer
    from alphazero_hpc.evaluate.runner import MatchPlan, make_player
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.store.runconfig import read_run_config

    cfg = read_run_config(RunPaths(eval_run))
    assert cfg.eval.policy_temperature == 0 and cfg.play_temperature == cfg.mcts.policy_temperature == 1.0
    warm = cfg.playing(None, 1.5)
    assert warm.eval.policy_temperature == 1.5 and warm.mcts.policy_temperature == 1.0 and warm.eval.algorithm == "same"
    setup = PlaySetup.of_config(warm)
    assert setup.policy_temperature == 1.5 and setup != PlaySetup.of_config(cfg)
    plan = MatchPlan("gen:1", "random", 2, PlaySetup(4, policy_temperature=setup.policy_temperature), "book", 0, 24)
    player = make_player("gen:1", RunPaths(eval_run), warm, plan, search_rules(24), "cpu")
    assert isinstance(player, NetPlayer), player
    assert player.mcts.policy_temperature == 1.5 and plan.key.endswith("|policy_temperature=1.5")
    assert "policy_temperature" not in MatchPlan("gen:1", "random", 2, PlaySetup(4), "book", 0, 24).key
    # the key names every field of the setup in the order that ledgers written before each field existed hold
    full = MatchPlan("gen:1", "random", 2, PlaySetup(4, True, 0.5, "gumbel", 3.0), "book", 0, 24, 2)
    assert full.key == ("gen:1|random|games=2|sims=4|openings=book|seed=0|max_plies=24|adjudicate_material=2"
                        "|mate_in_one|leaf_capture=0.5|search=gumbel|policy_temperature=3")
    assert PlaySetup.of_entry(full.setup.entry_fields() | {"simulations": 4}) == full.setup
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "random", "--games", "2",
                "--simulations", "4", "--max-plies", "24", "--policy-temperature", "1.5")
    assert r.returncode == 0, r.stderr
    (entry,) = read_ledger(RunPaths(eval_run))
    assert entry["policy_temperature"] == 1.5 and entry["key"].endswith("|policy_temperature=1.5")
    assert PlaySetup.of_entry(entry) == PlaySetup.of_config(warm, 4)
    assert search_tag(entry, cfg) == "puct4,T=1.5" and search_tag(entry) == "T=1.5"
    with pytest.raises(Exception, match="eval.policy_temperature"):
        dataclasses.replace(cfg.eval, policy_temperature=0.05)
    with pytest.raises(Exception, match="mcts.policy_temperature"):
        dataclasses.replace(cfg.mcts, policy_temperature=0.0)


def test_kept_trees_carry_a_games_visits_to_its_next_turn_and_start_afresh_where_the_tree_ended():
    """KeptTrees: after a move and the reply, the game's tree is found again, advanced by the reply and searched on
    with the visits the reply's subtree had; a reply the tree ended (a repetition, a draw inside the tree but not
    in the game) gets a new root that the search expands and plays a legal move from; a game not seen is released."""
    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.players import KeptTrees
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.search.fakes import MaterialEvaluator

    kept = KeptTrees(MaterialEvaluator(2), MCTSConfig(tree_reuse=False), search_rules(400))  # keeps trees all the same
    search = kept.search
    board = chess.Board()
    (tree,) = kept.trees([board])
    (result,) = search.search_trees([tree], 200, pv_length=2)
    kept.keep(tree, board, result.best_move)
    board.push(result.pv[0])
    visits = search.root_visits(tree)  # the kept tree's root: the position after the move
    board.push(result.pv[1])  # the reply the search expected
    assert kept.trees([board]) == [tree] and search.root_visits(tree) > 1 and search.root_visits(tree) < visits
    carried = search.root_visits(tree)
    (again,) = search.search_trees([tree], 20)
    assert again.root_visits == carried + 21
    # Nf3 Nf6, Ng1 kept, then the reply Ng8: the start position again, a draw inside the tree (it repeats), not in
    # the game
    board = chess.Board()
    for san in ("Nf3", "Nf6"):
        board.push_san(san)
    kept = KeptTrees(MaterialEvaluator(2), MCTSConfig(), search_rules(400))
    search = kept.search
    (tree,) = kept.trees([board])
    (result,) = search.search_trees([tree], 2000)
    back = result.moves.index(board.parse_san("Ng1"))
    kept.keep(tree, board, result.moves[back])
    board.push_san("Ng1")
    after = search.result(tree)  # the kept tree's root: the position after Ng1, where the search visited Ng8
    assert after.visits[after.moves.index(board.parse_san("Ng8"))] > 0
    board.push_san("Ng8")
    (fresh,) = kept.trees([board])
    assert fresh != tree and search.terminal_value(fresh) is None
    (r,) = search.search_trees([fresh], 20)
    assert r.best_move in board.legal_moves and r.root_visits == 21
    kept.keep(fresh, board, r.best_move)
    assert kept.trees([]) == []  # the game ended: its tree is released
    search.compact(force=True)
    assert search.num_nodes == 0


def test_a_network_with_tree_reuse_plays_legal_games_and_names_it_in_the_key(eval_run):
    """eval.tree_reuse (evaluate --tree-reuse) keeps the trees of a match's games; the ledger key, entry and tag say
    so, so games with and without it are never one player's."""
    from alphazero_hpc.evaluate.ledger import search_tag
    from alphazero_hpc.store.runconfig import read_run_config

    cfg = read_run_config(RunPaths(eval_run))
    assert not cfg.eval.tree_reuse and not PlaySetup.of_config(cfg).tree_reuse
    setup = PlaySetup.of_config(cfg.playing(None, None, True), 4)
    assert setup.tree_reuse and setup.key_flags() == "|tree_reuse"
    assert PlaySetup.of_entry(setup.entry_fields() | {"simulations": 4}) == setup
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "random", "--games", "4",
                "--simulations", "8", "--max-plies", "40", "--tree-reuse")
    assert r.returncode == 0, r.stderr
    (entry,) = read_ledger(RunPaths(eval_run))
    assert entry["tree_reuse"] is True and entry["key"].endswith("|tree_reuse") and entry["games"] == 4
    assert search_tag(entry, cfg) == "puct8,reuse" and search_tag(entry) == "reuse"


# -- Stockfish -------------------------------------------------------------------------------------------
def test_stockfish_opponent(eval_run, stockfish):
    r = run_cli("evaluate", str(eval_run), "--generation", "1", "--opponent", "stockfish:nodes=200,skill=0",
                "--games", "2", "--simulations", "4", "--max-plies", "60")
    assert r.returncode == 0, r.stderr
    (entry,) = read_ledger(RunPaths(eval_run))
    assert entry["opponent"] == "stockfish:skill=0,nodes=200" and entry["games"] == 2
    pgn = (eval_run / entry["pgn"]).read_text()
    assert pgn.count("[Event ") == 2 and '[Black "stockfish:skill=0,nodes=200"]' in pgn


def test_search_of_a_repeated_position_nobody_claimed():
    # Under the evaluation search's rules a repeated position is a draw; the game goes on, so the root must
    # still be searched (Forest.new_root) and a legal move come back, to the search API and to the player.
    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.players import NetPlayer
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.search.api import TreeSearch
    from alphazero_hpc.search.fakes import MaterialEvaluator

    board = chess.Board()
    for san in ("Nf3", "Nf6", "Ng1", "Ng8"):  # the start position again: seen twice, not claimable
        board.push_san(san)
    (result,) = TreeSearch(MaterialEvaluator(2), MCTSConfig(), search_rules(400), 2).search([board], 8)
    assert result.best_move in board.legal_moves and result.root_visits == 9
    player = NetPlayer(MaterialEvaluator(2), MCTSConfig(), 8, search_rules(400), "material")
    assert player.choose([board]) == [result.best_move]


def test_a_file_system_without_flock_is_one_clear_line(tmp_path, monkeypatch):
    """Lustre mounted noflock / NFS nolock: flock fails with ENOLCK; the ledger says so instead of a traceback."""
    import errno
    import fcntl

    def refuse(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    with pytest.raises(RunDirError, match="does not support flock"):
        append_entry(RunPaths(tmp_path), {"key": "k1", "wins": 1})
