"""Gumbel root search (mcts.algorithm: gumbel) against fakes whose right answer is known, as mctx tests it."""

import dataclasses

import chess
import numpy as np
import pytest

from alphazero_hpc.config import MCTSConfig, load_config
from alphazero_hpc.game.encoding import NUM_MOVES, encode_boards, move_index
from alphazero_hpc.game.rules import Rules
from alphazero_hpc.search.api import TreeSearch
from alphazero_hpc.search.fakes import MaterialEvaluator, UniformEvaluator
from alphazero_hpc.search.gumbel import considered_visits, improved_policy, log_priors, sigma
from alphazero_hpc.search.puct import deterministic_scores
from alphazero_hpc.selfplay.engine import SelfPlayEngine
from alphazero_hpc.selfplay.plan import GameSpec
from alphazero_hpc.train.data import wdl_target

GUMBEL = MCTSConfig(algorithm="gumbel", dirichlet_epsilon=0.0)


class TableEvaluator:
    """A bandit: the network's answer for each position is looked up by its input planes."""

    def __init__(self, table: dict[bytes, tuple[np.ndarray, float]], history: int = 1) -> None:
        self.table, self.history = table, history
        self.attack_planes = 0  # the Evaluator protocol's: plain planes (the table's keys are encode_boards')

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        answers = [self.table[p.tobytes()] for p in planes]  # a KeyError: the search asked about another position
        return np.stack([a[0] for a in answers]).astype(np.float32), np.array([a[1] for a in answers], np.float32)


def bandit(root: chess.Board, logits: dict[str, float], q: dict[str, float], root_value: float) -> TableEvaluator:
    """Root logits per move (others -30) and the value q of each move for the side to move at the root."""
    row = np.full(NUM_MOVES, -30.0, np.float32)
    for uci, logit in logits.items():
        row[move_index(chess.Move.from_uci(uci), root.turn)] = logit
    table = {encode_boards([root], 1)[0].tobytes(): (row, root_value)}
    for move in root.legal_moves:
        child = root.copy()
        child.push(move)
        table[encode_boards([child], 1)[0].tobytes()] = (np.zeros(NUM_MOVES, np.float32), -q.get(move.uci(), 0.0))
    return TableEvaluator(table)


def expected_improved_policy(logits: np.ndarray, q: np.ndarray, visits: np.ndarray, root_value: float,
                             c_visit: float = 50.0, c_scale: float = 1.0) -> np.ndarray:
    """The paper's formula, written out here on its own: softmax(logits + (c_visit + max N) c_scale q'), q' the
    completed Q rescaled to [0, 1]; an unvisited move is completed with the mixed value."""
    prior = np.exp(logits - logits.max())
    prior /= prior.sum()
    seen = visits > 0
    mixed = (root_value + visits.sum() * (prior[seen] * q[seen]).sum() / prior[seen].sum()) / (visits.sum() + 1)
    completed = np.where(seen, q, mixed)
    rescaled = (completed - completed.min()) / (completed.max() - completed.min())
    z = logits + (c_visit + visits.max()) * c_scale * rescaled
    return np.exp(z - z.max()) / np.exp(z - z.max()).sum()


@pytest.mark.parametrize("simulations", [20, 8])
def test_improved_policy_of_a_bandit_is_the_formula(simulations):
    root = chess.Board()
    moves = [m.uci() for m in root.legal_moves]
    rng = np.random.default_rng(3)
    logits = dict(zip(moves, rng.normal(size=len(moves)).tolist()))
    q = dict(zip(moves, rng.uniform(-0.8, 0.8, size=len(moves)).tolist()))
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=20)
    (result,) = TreeSearch(bandit(root, logits, q, 0.1), cfg, Rules(), 1).search([root], simulations)
    order = [m.uci() for m in result.moves]
    visits = result.visits.astype(np.float64)
    assert visits.sum() == simulations and visits.max() == 1  # sequential halving: one visit each first
    want = expected_improved_policy(np.array([logits[m] for m in order]), np.array([q[m] for m in order]), visits, 0.1)
    assert result.improved is not None
    np.testing.assert_allclose(result.improved, want, rtol=2e-4, atol=1e-7)
    np.testing.assert_allclose(result.policy_target, result.improved)


def test_improved_root_value_weighs_moves_as_the_policy_target_does():
    """mcts.gumbel_root_value: improved reports sum_a improved(a) q(a) (every move visited once here, so no move is
    completed), near the one good move's value; the default reports the mean over every visit, which one visit
    each of twenty moves drags towards the bad ones."""
    root = chess.Board()
    moves = [m.uci() for m in root.legal_moves]
    rng = np.random.default_rng(5)
    logits = dict(zip(moves, rng.normal(size=len(moves)).tolist()))
    q = {m: -0.5 for m in moves} | {"g1f3": 0.9}
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=20)
    (mean,) = TreeSearch(bandit(root, logits, q, 0.1), cfg, Rules(), 1).search([root], 20)
    improved_cfg = dataclasses.replace(cfg, gumbel_root_value="improved")
    (result,) = TreeSearch(bandit(root, logits, q, 0.1), improved_cfg, Rules(), 1).search([root], 20)
    order = [m.uci() for m in result.moves]
    assert result.visits.min() == 1  # every move visited: no completed q in the sum
    qs = np.array([q[m] for m in order])
    want = expected_improved_policy(np.array([logits[m] for m in order]), qs, result.visits.astype(np.float64), 0.1)
    assert result.value == pytest.approx(float(want @ qs), abs=1e-5)
    assert result.value > 0.8 and mean.value < -0.3
    assert result.improved is not None and mean.improved is not None
    assert result.best_move == mean.best_move and np.allclose(result.improved, mean.improved)  # only the value differs


def test_two_simulations_two_moves_play_the_better_one():
    root = chess.Board()
    # e2e4 is the prior's favourite; d2d4 is a little less likely and better. m = 2, n = 2: one visit each.
    logits = {"e2e4": 2.0, "d2d4": 1.9}
    q = {"e2e4": -0.2, "d2d4": 0.3}
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=2)
    (result,) = TreeSearch(bandit(root, logits, q, 0.0), cfg, Rules(), 1).search([root], 2)
    assert result.best_move.uci() == "d2d4"
    assert sorted(result.visits[result.visits > 0].tolist()) == [1.0, 1.0]
    # PUCT with the same two simulations puts both on the prior's favourite and plays it.
    (puct,) = TreeSearch(bandit(root, logits, q, 0.0), MCTSConfig(dirichlet_epsilon=0.0), Rules(), 1).search([root], 2)
    assert puct.best_move.uci() == "e2e4"


# (m, n) -> the visit count a simulation looks for, from the paper's schedule. (4, 8), (16, 16), (2, 2), (4, 16) and
# (16, 50) are what mctx's seq_halving.get_sequence_of_considered_visits returns (run on google-deepmind/mctx).
SCHEDULES = {
    (4, 16): (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5),
    (16, 50): (0,) * 16 + (1,) * 8 + (2,) * 4 + (3,) * 4 + (4,) * 4 + tuple(v for k in range(5, 12) for v in (k, k)),
    (4, 8): (0, 0, 0, 0, 1, 1, 2, 2),
    (2, 2): (0, 0),
    (1, 3): (0, 1, 2),
    (16, 16): (0,) * 16,
    (3, 7): (0, 0, 0, 1, 1, 2, 2),
    (16, 64): (0,) * 16 + (1,) * 8 + (2,) * 8 + (3,) * 4 + (4,) * 4 + (5,) * 4 + (6,) * 4
              + tuple(v for k in range(7, 15) for v in (k, k)),
}


@pytest.mark.parametrize("m,n", sorted(SCHEDULES))
def test_sequential_halving_schedule(m, n):
    assert considered_visits(m, n) == SCHEDULES[(m, n)]


@pytest.mark.parametrize("fen,uci", [
    ("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8"),  # back-rank mate
    ("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1", "f3f7"),  # scholar's mate
])
@pytest.mark.parametrize("interior", ["puct", "deterministic"])
def test_gumbel_finds_mate_in_one(fen, uci, interior):
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=64, gumbel_interior=interior)
    (result,) = TreeSearch(UniformEvaluator(1), cfg, Rules(), 1).search([chess.Board(fen)], 120)
    assert result.best_move.uci() == uci
    assert result.improved is not None
    assert result.improved[result.best] == result.improved.max()


def test_gumbel_keeps_its_queen_and_takes_a_hanging_one():
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=64)
    keep, take = TreeSearch(MaterialEvaluator(1), cfg, Rules(), 1).search(
        [chess.Board("4k3/8/4p3/8/3Q4/8/8/4K3 w - - 0 1"), chess.Board("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1")], 200)
    b = chess.Board("4k3/8/4p3/8/3Q4/8/8/4K3 w - - 0 1")
    b.push(keep.best_move)
    assert not b.is_attacked_by(chess.BLACK, keep.best_move.to_square) or b.is_check(), f"hung the queen: {keep.best_move}"
    assert take.best_move.uci() == "d2d5"


def test_interior_rule_is_the_improved_policy_minus_the_visit_share():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6))
    visits = np.array([3.0, 0.0, 1.0, 5.0, 0.0, 2.0])
    q = np.where(visits > 0, rng.uniform(-1, 1, 6), 0.0)
    block = deterministic_scores(p[None], np.ones((1, 6), bool), (visits > 0)[None], visits[None], q[None],
                                 np.array([0.2]), 50.0, 1.0)[0]
    want = improved_policy(log_priors(p), sigma(q, visits, p, 0.2, 50.0, 1.0)) - visits / (1 + visits.sum())
    np.testing.assert_allclose(block, want, rtol=1e-5, atol=1e-6)


def _play(cfg, n_games, compact_at=None):
    eng = SelfPlayEngine(MaterialEvaluator(cfg.model.history), cfg)
    if compact_at:
        eng.search._compact_at = compact_at
    return sorted(eng.play([GameSpec(0, i, 500 + i) for i in range(n_games)]), key=lambda r: r.spec.index)


def test_gumbel_selfplay_same_seed_same_games_whatever_the_batch_mates():
    sets = ["mcts.algorithm=gumbel", "mcts.simulations=8", "mcts.fast_simulations=2", "mcts.full_search_prob=0.5",
            "selfplay.max_plies=40", "selfplay.temperature_plies=10"]
    together = _play(load_config(None, sets + ["selfplay.games_in_flight=4"]), 4, compact_at=400)
    alone = _play(load_config(None, sets + ["selfplay.games_in_flight=1"]), 4)
    for a, b in zip(together, alone):
        assert [m.uci() for m in a.moves] == [m.uci() for m in b.moves]
        np.testing.assert_array_equal(a.policy_prob, b.policy_prob)
    # every recorded row holds the improved policy over all legal moves, summing to one
    rec = together[0]
    offsets = np.concatenate(([0], np.cumsum(rec.policy_counts)))
    for r in range(len(rec.policy_counts)):
        np.testing.assert_allclose(rec.policy_prob[offsets[r]:offsets[r + 1]].sum(), 1.0, rtol=1e-5)
    assert rec.policy_counts[0] == 20  # the start position: every legal move, not only the visited ones


def test_temperature_zero_gumbel_plays_without_noise():
    """With temperature 0 the noise is off, so two seeds play the same game (the survivor of the search)."""
    sets = ["mcts.algorithm=gumbel", "mcts.simulations=6", "mcts.fast_simulations=2", "selfplay.max_plies=12", "selfplay.temperature=0",
            "selfplay.final_temperature=0", "selfplay.resign_threshold=-1", "mcts.full_search_prob=1.0"]
    cfg = load_config(None, sets)
    eng = SelfPlayEngine(MaterialEvaluator(cfg.model.history), cfg)
    a, b = eng.play([GameSpec(0, 0, 1), GameSpec(0, 1, 2)])
    assert [m.uci() for m in a.moves] == [m.uci() for m in b.moves]


def test_value_target_mixes_result_and_search_value():
    z = np.array([1, 0, -1, 1], np.int8)
    q = np.array([0.5, -0.25, 0.0, -1.0], np.float16)
    np.testing.assert_array_equal(wdl_target(z, q, 0.0), [0, 1, 2, 0])
    mixed = wdl_target(z, q, 0.25)
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0)
    expectation = mixed[:, 0] - mixed[:, 2]  # win - loss
    np.testing.assert_allclose(expectation, 0.75 * z + 0.25 * q.astype(np.float32), atol=1e-6)


def _think(search: TreeSearch, tree: int, simulations: int):
    """One move's Gumbel search of ``tree``, as self-play runs it (the root evaluated first, no noise)."""
    while (moves := search.num_moves(tree)) is None:
        search.step([tree])
    search.start_gumbel(tree, np.zeros(moves), simulations)
    for _ in range(simulations):
        search.step([tree])
    return search.result(tree)


@pytest.mark.parametrize("mate_in_one", [False, True])
def test_mate_in_one_is_played_when_the_priors_never_consider_it(mate_in_one):
    """Uniform priors with 2 considered moves consider the first two legal moves; the mate (h8b2) is the 19th. The
    search proves it only with mcts.mate_in_one, and then plays it whatever the priors say."""
    board = chess.Board("7Q/8/8/3K4/8/8/k7/B7 w - - 1 71")
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=2, mate_in_one=mate_in_one)
    s = TreeSearch(UniformEvaluator(1), cfg, Rules(mate_in_one=mate_in_one), 1)
    result = _think(s, s.open(board), 8)
    assert (result.best_move.uci() == "h8b2") == mate_in_one


@pytest.mark.parametrize("mate_in_one", [False, True])
def test_a_move_that_allows_a_mate_in_one_is_proven_lost_one_visit_deep(mate_in_one):
    """After 1. f3 e5, 2. g4 allows Qh4#. With mcts.mate_in_one the search knows it from the child itself (q = -1
    after its first visit, no network call below it) and does not play it; without, one visit says nothing."""
    board = chess.Board()
    for san in ("f3", "e5"):
        board.push_san(san)
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=32, mate_in_one=mate_in_one)
    s = TreeSearch(UniformEvaluator(1), cfg, Rules(mate_in_one=mate_in_one), 1)
    tree = s.open(board)
    result = _think(s, tree, 19)  # one visit for each of the 19 legal moves
    g4 = result.moves.index(chess.Move.from_uci("g2g4"))
    q = s.forest.child_q(s._roots[tree])
    assert result.visits[g4] == 1
    assert (q[g4] == -1.0) == mate_in_one
    # The game goes on into the proven win: the new root is searched (not over) and Black mates.
    s.advance(tree, g4)
    assert s.terminal_value(tree) is None
    reply = _think(s, tree, 8)
    assert (reply.best_move.uci() == "d8h4") == mate_in_one


def test_improved_root_value_completes_the_moves_it_did_not_visit():
    """With fewer simulations than moves, an unvisited move enters the improved value with the mixed value, as it
    enters the improved policy: the sum over every legal move, written out here from the visited moves' q."""
    root = chess.Board()
    moves = [m.uci() for m in root.legal_moves]
    rng = np.random.default_rng(9)
    logits = dict(zip(moves, rng.normal(size=len(moves)).tolist()))
    q = dict(zip(moves, rng.uniform(-0.8, 0.8, size=len(moves)).tolist()))
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=8, gumbel_root_value="improved")
    (result,) = TreeSearch(bandit(root, logits, q, 0.1), cfg, Rules(), 1).search([root], 8)
    order = [m.uci() for m in result.moves]
    visits = result.visits.astype(np.float64)
    assert (visits == 0).sum() == len(moves) - 8
    lg, qs = np.array([logits[m] for m in order]), np.array([q[m] for m in order])
    prior = np.exp(lg - lg.max()) / np.exp(lg - lg.max()).sum()
    seen = visits > 0
    mixed = (0.1 + visits.sum() * (prior[seen] * qs[seen]).sum() / prior[seen].sum()) / (visits.sum() + 1)
    want = expected_improved_policy(lg, qs, visits, 0.1) @ np.where(seen, qs, mixed)
    assert result.value == pytest.approx(float(want), abs=1e-5)


def test_improved_root_value_needs_gumbel():
    with pytest.raises(Exception, match="mcts.gumbel_root_value"):
        load_config(None, ["mcts.gumbel_root_value=improved"])


@pytest.mark.parametrize("per_pawn", [0.0, 0.25])
def test_leaf_capture_value_sees_a_queen_left_to_a_pawn_one_visit_deep(per_pawn):
    """Qe3 puts the queen where Black's f4 pawn takes it. With mcts.leaf_capture_value the leaf after Qe3 is worth
    9 pawns' logit to Black (a uniform network says 0 everywhere), so one visit tells the search; Qxf4, which leaves nothing hanging, stays at the network's value."""
    board = chess.Board("7k/8/8/8/5p2/8/3Q4/4K3 w - - 0 1")
    cfg = dataclasses.replace(GUMBEL, gumbel_considered=64, leaf_capture_value=per_pawn)
    s = TreeSearch(UniformEvaluator(1), cfg, Rules(), 1)
    tree = s.open(board)
    result = _think(s, tree, board.legal_moves.count())
    q = s.forest.child_q(s._roots[tree])
    e3, xf4 = (result.moves.index(chess.Move.from_uci(u)) for u in ("d2e3", "d2f4"))
    assert result.visits[e3] == result.visits[xf4] == 1
    assert q[e3] == pytest.approx(-np.tanh(9 * per_pawn), abs=1e-6)
    assert q[xf4] == pytest.approx(0.0, abs=1e-6)
    assert result.best_move.uci() != "d2e3" or per_pawn == 0
