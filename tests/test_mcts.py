import chess
import numpy as np
import pytest

from alphazero_hpc.config import MCTSConfig, load_config
from alphazero_hpc.game.encoding import NUM_MOVES, chain_for_board
from alphazero_hpc.game.position import from_board
from alphazero_hpc.search.fakes import MaterialEvaluator, UniformEvaluator
from alphazero_hpc.game.rules import ADJUDICATED, Rules
from alphazero_hpc.search.api import TreeSearch
from alphazero_hpc.search.forest import Forest
from alphazero_hpc.selfplay.engine import SelfPlayEngine
from alphazero_hpc.selfplay.plan import GameSpec

NO_NOISE = MCTSConfig(simulations=200, dirichlet_epsilon=0.0)


def search(fens, evaluator, sims=200, rules=Rules(), cfg=NO_NOISE, history=1):
    """The search API over ``fens``: ``sims`` simulations in every tree at once."""
    s = TreeSearch(evaluator, cfg, rules, history)
    trees = [s.open(chess.Board(f)) for f in fens]
    for _ in range(sims + 1):
        s.step(trees)
    return s, trees


def forest_of(s, trees):
    """The forest under the API and its root nodes, for tests of the node arrays themselves."""
    return s.forest, [s._roots[t] for t in trees]


def best_move(s, tree):
    result = s.result(tree)
    return result.moves[int(np.argmax(result.visits))], result.visits


MATES_IN_ONE = [
    ("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8"),  # back-rank mate
    ("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1", "f3f7"),  # scholar's mate
]


@pytest.mark.parametrize("fen,uci", MATES_IN_ONE)
def test_search_finds_mate_in_one_with_a_uniform_evaluator(fen, uci):
    s, trees = search([fen], UniformEvaluator(1))
    move, visits = best_move(s, trees[0])
    assert move.uci() == uci
    assert visits.max() > 0.5 * visits.sum()  # a proven win draws most of the visits
    assert s.result(trees[0]).value > 0.5


@pytest.mark.parametrize("mate_in_one", [False, True])
def test_puct_plays_a_mate_in_one_its_visits_never_reached_only_with_the_proof(mate_in_one):
    """Uniform priors and 8 simulations visit the first 8 legal moves; the mate (h8b2) is the 19th. PUCT's root
    plays it with mcts.mate_in_one (result.chosen), and without it plays the most visited move."""
    import dataclasses

    cfg = dataclasses.replace(NO_NOISE, mate_in_one=mate_in_one)
    s, trees = search(["7Q/8/8/3K4/8/8/k7/B7 w - - 1 71"], UniformEvaluator(1), sims=8,
                      rules=Rules(mate_in_one=mate_in_one), cfg=cfg)
    result = s.result(trees[0])
    mate = [m.uci() for m in result.moves].index("h8b2")
    assert result.visits[mate] == 0
    assert (result.best_move.uci() == "h8b2") == mate_in_one
    assert (result.chosen == mate) if mate_in_one else result.chosen is None
    # What self-play records: the mate as the policy target and a proven win as the root's value.
    assert (result.policy_target[mate] == 1.0) == mate_in_one
    assert (result.value == 1.0) == mate_in_one


def test_many_positions_searched_in_one_batch_agree_with_searching_alone():
    fens = [f for f, _ in MATES_IN_ONE] + [chess.STARTING_FEN]
    s, trees = search(fens, UniformEvaluator(1), sims=60)
    assert s.stats.batches <= 61  # one network call per step for all three trees
    for fen, tree in zip(fens, trees):
        s2, t2 = search([fen], UniformEvaluator(1), sims=60)
        assert np.array_equal(s.result(tree).visits, s2.result(t2[0]).visits)


def test_search_does_not_hang_its_queen():
    # White queen on d4 attacked by nothing; moving it to d5 (attacked by the e6 pawn) hangs it.
    fen = "4k3/8/4p3/8/3Q4/8/8/4K3 w - - 0 1"
    s, trees = search([fen], MaterialEvaluator(1), sims=300)
    move, _ = best_move(s, trees[0])
    b = chess.Board(fen)
    b.push(move)
    assert not b.is_attacked_by(chess.BLACK, move.to_square) or b.is_check(), f"hung the queen with {move}"


def test_search_takes_a_hanging_queen():
    fen = "4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1"
    s, trees = search([fen], MaterialEvaluator(1), sims=200)
    assert best_move(s, trees[0])[0].uci() == "d2d5"


@pytest.mark.parametrize("fen,value", [
    ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", 0.0),  # stalemate
    ("7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", -1.0),  # checkmated
    ("8/8/4k3/8/8/3BK3/8/8 w - - 0 1", 0.0),  # insufficient material
    ("8/8/4k3/8/8/3RK3/8/8 w - - 100 80", 0.0),  # 50-move rule
])
def test_terminal_positions(fen, value):
    forest = Forest(Rules(), 1)
    node = forest.new_node(from_board(chess.Board(fen)), None)
    assert forest.terminal_value(node) == value


def test_threefold_repetition_and_max_plies_end_the_game():
    b = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1"]:
        b.push_san(san)
    forest = Forest(Rules(repetitions_for_draw=3), 1)
    parent = chain_for_board(b, 1)
    b.push_san("Ng8")
    assert forest.terminal_value(forest.new_node(from_board(b), parent)) == 0.0
    five = Forest(Rules(repetitions_for_draw=5), 1)
    assert five.terminal_value(five.new_node(from_board(b), parent)) is None
    long_game = chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 0 60")  # ply 118
    for max_plies, expect in ((118, 0.0), (119, None)):
        f = Forest(Rules(max_plies=max_plies), 1)
        assert f.terminal_value(f.new_node(from_board(long_game), None)) == expect


def test_visits_add_up_and_values_stay_in_range():
    forest, roots = forest_of(*search([chess.STARTING_FEN], MaterialEvaluator(1), sims=150))
    _, visits, moves = forest.children(roots[0])
    assert visits.sum() == forest.node_n()[roots[0]] - 1 == 150
    assert len(moves) == 20
    assert np.all(np.abs(forest.node_w()[: forest.num_nodes]) <= forest.node_n()[: forest.num_nodes] + 1e-4)


def test_compaction_keeps_exactly_the_live_trees():
    s, (kept, dropped) = search([chess.STARTING_FEN, MATES_IN_ONE[0][0]], UniformEvaluator(1), sims=80)
    s.advance(kept, int(np.argmax(s.result(kept).visits)))  # the most visited child's subtree is the tree now
    kept_visits = s.root_visits(kept)
    s.release(dropped)
    assert s.compact(force=True)
    assert s.num_nodes == kept_visits  # one node per visit of the kept subtree, nothing else
    assert s.root_visits(kept) == kept_visits
    s.step([kept])  # the compacted tree is still searchable through its handle
    assert s.root_visits(kept) == kept_visits + 1


def _play(cfg, n_games, compact_at=None):
    eng = SelfPlayEngine(UniformEvaluator(cfg.model.history), cfg)
    if compact_at:
        eng.search._compact_at = compact_at
    recs = sorted(eng.play([GameSpec(0, i, 1000 + i) for i in range(n_games)]), key=lambda r: r.spec.index)
    return recs


def test_selfplay_is_reproducible_and_independent_of_batch_mates_and_compaction():
    cfg = load_config(None, ["selfplay.max_plies=30", "mcts.simulations=12", "selfplay.games_in_flight=4"])
    a = _play(cfg, 4)
    b = _play(cfg, 4, compact_at=300)  # compacts many times
    single = load_config(None, ["selfplay.max_plies=30", "mcts.simulations=12", "selfplay.games_in_flight=1"])
    c = _play(single, 4)
    for x, y, z in zip(a, b, c):
        assert [m.uci() for m in x.moves] == [m.uci() for m in y.moves] == [m.uci() for m in z.moves]
        assert np.array_equal(x.policy_prob, y.policy_prob)
    assert len({tuple(m.uci() for m in r.moves) for r in a}) == 4  # different seeds, different games


def test_records_hold_consistent_targets():
    cfg = load_config(None, ["selfplay.max_plies=40", "mcts.simulations=10", "mcts.full_search_prob=0.5",
                             "selfplay.games_in_flight=3"])
    for r in _play(cfg, 3):
        n = r.num_positions
        assert 0 < n < r.plies  # playout caps: only full searches are recorded
        assert len(r.policy_counts) == n and r.policy_counts.sum() == len(r.policy_index) == len(r.policy_prob)
        offs = np.concatenate(([0], np.cumsum(r.policy_counts)))
        for i in range(n):
            assert abs(r.policy_prob[offs[i]:offs[i + 1]].sum() - 1) < 1e-5
        signs = np.where(r.positions.turn, 1, -1)
        assert np.array_equal(r.value_target, (r.result * signs).astype(np.int8))
        assert np.all(r.plies_left == r.plies - r.ply)


def test_resignation_and_playthrough_false_positives_are_tracked():
    # A material evaluator with a steep scale makes lost-looking positions common.
    cfg = load_config(None, ["selfplay.max_plies=120", "mcts.simulations=16", "selfplay.games_in_flight=8",
                             "selfplay.resign_threshold=-0.5", "selfplay.resign_consecutive=1",
                             "selfplay.resign_playthrough=0.5", "mcts.dirichlet_epsilon=0.5"])
    eng = SelfPlayEngine(MaterialEvaluator(cfg.model.history, scale=1.0), cfg)
    recs = list(eng.play([GameSpec(0, i, i) for i in range(16)]))
    resigned = [r for r in recs if r.termination == "resignation"]
    through = [r for r in recs if r.playthrough]
    assert resigned and through
    assert all(not r.playthrough for r in resigned)
    for r in recs:
        assert r.resign_false_positive <= r.would_resign <= r.playthrough


def test_adjudicated_wins_teach_a_share_of_wins_and_rule_draws_can_stay_draws():
    """The same games (same seeds) under three adjudication settings: the moves never change, only which games are
    scored on material and what their positions are taught."""
    def play(*extra):
        cfg = load_config(None, ["selfplay.max_plies=40", "mcts.simulations=8", "selfplay.games_in_flight=8",
                                 "selfplay.no_progress_plies=8", "selfplay.resign_threshold=-1",
                                 "selfplay.adjudicate_material=1", *extra])
        eng = SelfPlayEngine(MaterialEvaluator(cfg.model.history, scale=1.0), cfg)
        return sorted(eng.play([GameSpec(0, i, 70 + i) for i in range(16)]), key=lambda r: r.spec.index)

    every, never, cut_only = play(), play("selfplay.adjudicated_win_share=0"), play("selfplay.adjudicate_rule_draws=false")
    for a, b, c in zip(every, never, cut_only):
        assert [m.uci() for m in a.moves] == [m.uci() for m in b.moves] == [m.uci() for m in c.moves]
        signs = np.where(a.positions.turn, 1, -1)
        assert np.array_equal(a.value_target, (a.result * signs).astype(np.int8))
        assert (b.result, b.termination) == (a.result, a.termination)  # the PGN and the counts keep the win ...
        assert not b.value_target.any() if b.termination == ADJUDICATED else np.array_equal(b.value_target, a.value_target)
        if a.termination == ADJUDICATED and a.plies < 40:  # ... a repetition or a stall while ahead: a draw
            assert (c.result, c.value_target.any(), c.termination in ("repetition", "no progress")) == (0, False, True)
        else:
            assert (c.result, c.termination) == (a.result, a.termination)
    cut = [r.plies == 40 for r in every if r.termination == ADJUDICATED]
    assert any(cut) and not all(cut)  # the check saw wins on material at the ply limit and at a rule's draw


class HashEvaluator(UniformEvaluator):
    """Logits and value that differ from position to position (a digest of the planes), so that priors are not
    uniform and any change of which logits a node's priors come from changes the search."""

    def evaluate(self, planes):
        b = planes.shape[0]
        seed = planes.reshape(b, -1).astype(np.float64) @ np.random.default_rng(7).random(planes[0].size)
        logits = np.stack([np.random.default_rng(int(s * 1e6) % 2**32).normal(0, 2, NUM_MOVES) for s in seed])
        return logits.astype(np.float32), np.tanh(np.sin(seed)).astype(np.float32)


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_lazy_expansion_changes_no_search_and_bounds_its_memory(algorithm):
    """A node's edges made on its second visit (from logits kept in a bounded pool) give the same search as edges
    made at once; a full pool falls back to expanding at once; most leaves never generate their moves."""
    cfg = MCTSConfig(simulations=64, dirichlet_epsilon=0.0, algorithm=algorithm, gumbel_considered=8)
    fens = [chess.STARTING_FEN, MATES_IN_ONE[1][0], "4k3/8/4p3/8/3Q4/8/8/4K3 w - - 0 1"]
    runs = {}
    for rows in (0, 8, 4096):  # eager, a pool smaller than the pending leaves, a pool large enough
        s = TreeSearch(HashEvaluator(1), cfg, Rules(), 1, lazy_rows=rows)
        boards = [chess.Board(f) for f in fens]
        trees = [s.open(b) for b in boards]
        results, pending = [], 0
        for _ply in range(3):  # trees that live across moves, as in self-play (the kept subtree has pending nodes)
            for _ in range(cfg.simulations + 1):
                s.step(trees)
                if algorithm == "gumbel":
                    for t in trees:
                        if not s.gumbel_started(t) and (n := s.num_moves(t)):
                            s.start_gumbel(t, np.zeros(n), cfg.simulations)
            pending = max(pending, s.forest.pending_rows)
            res = [s.result(t, pv_length=4) for t in trees]
            results.append([(r.moves, r.priors.tobytes(), r.visits.tobytes(), r.value, r.pv,
                             None if r.improved is None else r.improved.tobytes()) for r in res])
            for t, r in zip(trees, res):
                s.advance(t, r.best)
            s.compact(force=True)
        assert len(s.forest._pool) <= rows
        runs[rows] = (results, s.forest.num_edges, pending)
    assert runs[8][0] == runs[0][0] and runs[4096][0] == runs[0][0]
    assert runs[0][2] == 0 and 0 < runs[8][2] <= 8 < runs[4096][2]
    assert runs[4096][1] < runs[0][1]  # fewer nodes got their legal moves


class _RankedEvaluator(UniformEvaluator):
    """Logit 0.5 x (policy index mod 7) for every move, every position even: priors that differ, known in advance."""

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, values = super().evaluate(planes)
        return logits + 0.5 * (np.arange(NUM_MOVES) % 7).astype(np.float32), values


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_policy_temperature_divides_the_logits_of_the_priors(temperature):
    """mcts.policy_temperature: a root's priors are softmax(logits / T) over its legal moves, whatever T."""
    from alphazero_hpc.game.encoding import move_index

    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 3 3")
    search = TreeSearch(_RankedEvaluator(1), MCTSConfig(policy_temperature=temperature), Rules(), 1)
    (result,) = search.search([board], 1)
    logits = np.array([0.5 * (move_index(m, board.turn) % 7) for m in result.moves]) / temperature
    assert len(set(logits.round(6))) > 2  # the priors differ between moves
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(result.priors, expected, rtol=1e-5)
