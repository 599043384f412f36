import chess
import numpy as np
import pytest

from alphazero_hpc.config import MCTSConfig, load_config
from alphazero_hpc.encoding import chain_for_board
from alphazero_hpc.evaluators import MaterialEvaluator, UniformEvaluator
from alphazero_hpc.mcts import BatchedSearch, Forest, Rules
from alphazero_hpc.selfplay import GameSpec, SelfPlayEngine

NO_NOISE = MCTSConfig(simulations=200, dirichlet_epsilon=0.0)


def search(fens, evaluator, sims=200, rules=Rules(), cfg=NO_NOISE, history=1):
    forest = Forest(rules, history)
    roots = [forest.new_node(chess.Board(f), chain_for_board(chess.Board(f), history)) for f in fens]
    s = BatchedSearch(forest, evaluator, cfg, history)
    for _ in range(sims + 1):
        s.step(roots)
    return forest, roots, s


def best_move(forest, root):
    _, visits, moves = forest.children(root)
    return moves[int(np.argmax(visits))], visits


MATES_IN_ONE = [
    ("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8"),  # back-rank mate
    ("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1", "f3f7"),  # scholar's mate
]


@pytest.mark.parametrize("fen,uci", MATES_IN_ONE)
def test_search_finds_mate_in_one_with_a_uniform_evaluator(fen, uci):
    forest, roots, _ = search([fen], UniformEvaluator(1))
    move, visits = best_move(forest, roots[0])
    assert move.uci() == uci
    assert visits.max() > 0.5 * visits.sum()  # a proven win draws most of the visits
    assert forest.q(roots[0]) > 0.5


def test_many_positions_searched_in_one_batch_agree_with_searching_alone():
    fens = [f for f, _ in MATES_IN_ONE] + [chess.STARTING_FEN]
    forest, roots, s = search(fens, UniformEvaluator(1), sims=60)
    assert s.stats.batches <= 61  # one network call per step for all three trees
    for fen, root in zip(fens, roots):
        f2, r2, _ = search([fen], UniformEvaluator(1), sims=60)
        assert np.array_equal(forest.children(root)[1], f2.children(r2[0])[1])


def test_search_does_not_hang_its_queen():
    # White queen on d4 attacked by nothing; moving it to d5 (attacked by the e6 pawn) hangs it.
    fen = "4k3/8/4p3/8/3Q4/8/8/4K3 w - - 0 1"
    forest, roots, _ = search([fen], MaterialEvaluator(1), sims=300)
    move, _ = best_move(forest, roots[0])
    b = chess.Board(fen)
    b.push(move)
    assert not b.is_attacked_by(chess.BLACK, move.to_square) or b.is_check(), f"hung the queen with {move}"


def test_search_takes_a_hanging_queen():
    fen = "4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1"
    forest, roots, _ = search([fen], MaterialEvaluator(1), sims=200)
    assert best_move(forest, roots[0])[0].uci() == "d2d5"


@pytest.mark.parametrize("fen,value", [
    ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", 0.0),  # stalemate
    ("7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", -1.0),  # checkmated
    ("8/8/4k3/8/8/3BK3/8/8 w - - 0 1", 0.0),  # insufficient material
    ("8/8/4k3/8/8/3RK3/8/8 w - - 100 80", 0.0),  # 50-move rule
])
def test_terminal_positions(fen, value):
    forest = Forest(Rules(), 1)
    node = forest.new_node(chess.Board(fen), None)
    assert forest.terminal_value(node) == value


def test_threefold_repetition_and_max_plies_end_the_game():
    b = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1"]:
        b.push_san(san)
    forest = Forest(Rules(repetitions_for_draw=3), 1)
    parent = chain_for_board(b, 1)
    b.push_san("Ng8")
    assert forest.terminal_value(forest.new_node(b.copy(stack=False), parent)) == 0.0
    five = Forest(Rules(repetitions_for_draw=5), 1)
    assert five.terminal_value(five.new_node(b.copy(stack=False), parent)) is None
    long_game = chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 0 60")  # ply 118
    for max_plies, expect in ((118, 0.0), (119, None)):
        f = Forest(Rules(max_plies=max_plies), 1)
        assert f.terminal_value(f.new_node(long_game.copy(), None)) == expect


def test_visits_add_up_and_values_stay_in_range():
    forest, roots, _ = search([chess.STARTING_FEN], MaterialEvaluator(1), sims=150)
    _, visits, moves = forest.children(roots[0])
    assert visits.sum() == forest.node_n()[roots[0]] - 1 == 150
    assert len(moves) == 20
    assert np.all(np.abs(forest.node_w()[: forest.num_nodes]) <= forest.node_n()[: forest.num_nodes] + 1e-4)


def test_compaction_keeps_exactly_the_live_trees():
    forest, roots, s = search([chess.STARTING_FEN, MATES_IN_ONE[0][0]], UniformEvaluator(1), sims=80)
    before = [forest.children(r)[1].copy() for r in roots]
    keep = [forest.child_of(roots[0], int(np.argmax(before[0])))]
    kept_visits = forest.node_n()[keep[0]]
    new = forest.compact(keep)[keep]
    assert forest.num_nodes == kept_visits  # one node per visit of the kept subtree, nothing else
    assert forest.node_n()[new[0]] == kept_visits
    s.step(new)  # the compacted tree is still searchable
    assert forest.node_n()[new[0]] == kept_visits + 1


def _play(cfg, n_games, compact_at=None):
    eng = SelfPlayEngine(UniformEvaluator(cfg.model.history), cfg)
    if compact_at:
        eng._compact_at = compact_at
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
