"""The search as one API: trees over positions in, a frozen ``SearchResult`` per tree out.

The search knows positions, moves and an ``Evaluator``; it knows nothing of games, players, shards or
files. Self-play, evaluation matches and the UCI engine all drive it through ``TreeSearch``:

    search = TreeSearch(evaluator, mcts_config, rules, history)
    results = search.search(boards, simulations)            # evaluation and UCI: one call

    tree = search.open(board)                                # self-play: trees that live across moves
    pending = search.prepare([tree, ...], root_fpu)          # select leaves, encode them
    search.finish(pending, *search.evaluate(pending.planes)[:2])   # (or hand the planes to a server)
    result = search.result(tree)                             # visits, policy target, value
    search.advance(tree, result.best)                        # play a move, keep the subtree
    search.advance_move(tree, reply)                         # (at play: the opponent's reply, if the tree has it)
    search.release(tree)                                     # the game ended

Trees are ints that stay valid across ``compact``; node ids stay inside the search. All trees of one
``TreeSearch`` share its forest, so one ``prepare`` selects a leaf in every tree given and one network call
evaluates them all.
"""

from __future__ import annotations

import dataclasses
import gc
from dataclasses import dataclass, field
from typing import Callable, Sequence

import chess
import numpy as np

from ..config import MCTSConfig
from ..game.rules import PROVEN_WIN, Rules
from .evaluator import Evaluator
from .forest import Forest
from .gumbel import GumbelRoot, improved_policy, improved_value, log_priors, sigma
from .puct import BatchedSearch, PendingStep, SearchStats

MATE_NOISE = 1e6  # the Gumbel noise of a root's mating move (mcts.mate_in_one): above any logit and sigma

Tree = int  # a handle from TreeSearch.open


@dataclass(frozen=True)
class SearchResult:
    """What the search found at one root. A = the root's legal moves, in the search's order.

    moves:   [A] the legal moves.
    priors:  [A] float32 network prior of each move (with root noise, if any was added).
    visits:  [A] float32 visits of each move's subtree.
    value:   value of the root for the side to move, in [-1, 1]: the mean over its visits, or with
             ``mcts.gumbel_root_value=improved`` the improved policy's expected completed q.
    root_visits: visits of the root (1 + the simulations that went through it).
    pv:      the principal variation from the root (most visited moves), when asked for.
    improved: [A] float32 Gumbel search's improved policy, softmax(logits + sigma(completed q)); None for PUCT.
    chosen:  Gumbel search's move (the survivor of sequential halving); for PUCT the mate in one with
             ``mcts.mate_in_one`` when the root has one (``value`` is then a proven win and ``policy_target``
             the mate), else None (the caller picks from the visits).
    """

    moves: tuple[chess.Move, ...]
    priors: np.ndarray
    visits: np.ndarray
    value: float
    root_visits: int
    pv: tuple[chess.Move, ...] = field(default=())
    improved: np.ndarray | None = None
    chosen: int | None = None

    @property
    def policy_target(self) -> np.ndarray:
        """[A] float32 policy training target: Gumbel's improved policy, else the visit distribution (AlphaZero)."""
        if self.improved is not None:
            return self.improved
        if self.chosen is not None:  # PUCT's proven mate in one, visited or not
            return np.eye(len(self.moves), dtype=np.float32)[self.chosen]
        return (self.visits / max(float(self.visits.sum()), 1.0)).astype(np.float32)

    @property
    def best(self) -> int:
        """Index of the move to play: Gumbel's survivor, else the most visited move, ties to the higher prior."""
        if self.chosen is not None:
            return self.chosen
        return int(np.lexsort((-self.priors, -self.visits))[0])

    @property
    def best_move(self) -> chess.Move:
        return self.moves[self.best]


class TreeSearch:
    """Batched tree search over any number of trees that share one forest and one evaluator."""

    def __init__(self, evaluator: Evaluator, cfg: MCTSConfig, rules: Rules, history: int,
                 compact_at: int = 50_000, lazy_rows: int | None = None) -> None:
        self.cfg = cfg
        self.history = history
        # lazy_rows (default mcts.lazy_rows): see Forest; 0 expands every node at once
        self.forest = Forest(rules, history, cfg.lazy_rows if lazy_rows is None else lazy_rows, cfg.move_generator,
                             cfg.policy_temperature)
        self._search = BatchedSearch(self.forest, evaluator, cfg, history)
        self._roots: dict[Tree, int] = {}  # tree -> its root node
        self._gumbel: dict[Tree, GumbelRoot] = {}  # trees searching a move with Gumbel (start_gumbel)
        self._next_tree = 0
        self._pending: list[PendingStep] = []  # prepared steps not yet finished (their node ids follow a compaction)
        self._compact_at = compact_at
        self._compact_floor = compact_at

    @property
    def stats(self) -> SearchStats:
        return self._search.stats

    @property
    def num_nodes(self) -> int:
        return self.forest.num_nodes

    # -- trees -------------------------------------------------------------------------------------------
    def open(self, board: chess.Board) -> Tree:
        """A tree for ``board``'s position, its history (and repetitions) read from the board's move stack."""
        tree = self._next_tree
        self._next_tree += 1
        self._roots[tree] = self.forest.new_root(board)
        return tree

    def release(self, tree: Tree) -> None:
        """Forget a tree; its nodes go at the next compaction."""
        self.forest.drop_pending([self._roots.pop(tree)])
        self._gumbel.pop(tree, None)

    def advance(self, tree: Tree, k: int) -> None:
        """Make the root's ``k``-th move: the child's subtree becomes the tree (with ``tree_reuse``), else a
        new root for the position after the move."""
        self._gumbel.pop(tree, None)
        f, root = self.forest, self._roots[tree]
        child = f.child_of(root, k)
        others = [c for j in range(f.edge_count(root)) if j != k and (c := f.child_of(root, j)) >= 0]
        f.drop_pending(others if self.cfg.tree_reuse or child < 0 else [*others, child])
        if self.cfg.tree_reuse and child >= 0:
            self._roots[tree] = child
        else:
            self._roots[tree] = f.new_node(f.pos[root].push(f.child_move(root, k)), f.chain[root])
        f.reopen(self._roots[tree])

    def advance_move(self, tree: Tree, move: chess.Move) -> bool:
        """``advance`` by ``move``, found among the root's moves; False, the tree unchanged, where the root has not
        been expanded or has no such move (the caller opens a new tree)."""
        if self.num_moves(tree) is None:
            return False
        moves = self.forest.children(self._roots[tree])[2]
        if move not in moves:
            return False
        self.advance(tree, moves.index(move))
        return True

    def root_visits(self, tree: Tree) -> int:
        return int(self.forest.node_n()[self._roots[tree]])

    def num_moves(self, tree: Tree) -> int | None:
        """Legal moves of an expanded root (None until the network has seen it)."""
        count = self.forest.edge_count(self._roots[tree])
        return count if count >= 0 else None

    def add_noise(self, tree: Tree, noise: np.ndarray, epsilon: float) -> None:
        """Mix ``noise`` [A] into the expanded root's priors: (1 - epsilon) * prior + epsilon * noise."""
        self.forest.add_noise(self._roots[tree], noise, epsilon)

    def start_gumbel(self, tree: Tree, noise: np.ndarray, simulations: int) -> None:
        """Search the (expanded) root's next move with Gumbel: ``noise`` [A] is added to the prior logits (zeros:
        none, as in evaluation) and ``simulations`` is the budget sequential halving divides."""
        root = self._roots[tree]
        _, visits, moves = self.forest.children(root)
        noise = np.array(noise, np.float64)
        if self.forest.rules.mate_in_one and (mate := self.forest.mating_edge(root)) is not None:
            noise[mate] = MATE_NOISE  # considered, and the survivor of every halving: the search plays a mate in one
        self._gumbel[tree] = GumbelRoot(noise, simulations, min(self.cfg.gumbel_considered, len(moves)), visits.copy())

    def gumbel_started(self, tree: Tree) -> bool:
        return tree in self._gumbel

    def terminal_value(self, tree: Tree) -> float | None:
        """The value for the side to move if the rules end the game at the root, else None."""
        return self.forest.terminal_value(self._roots[tree])

    def repetitions(self, tree: Tree) -> int:
        """Earlier occurrences of the root's position (in its history and the tree)."""
        return int(self.forest.chain[self._roots[tree]][1])

    def position(self, tree: Tree) -> tuple:
        """The root's position chain (``game.encoding``): what a training row encodes."""
        return self.forest.chain[self._roots[tree]]

    def result(self, tree: Tree, pv_length: int = 0) -> SearchResult:
        """The root's moves, priors, visits and value, and up to ``pv_length`` moves of principal variation."""
        f, root = self.forest, self._roots[tree]
        priors, visits, moves = f.children(root)
        result = SearchResult(tuple(moves), priors, visits, f.q(root), int(f.node_n()[root]))
        state = self._gumbel.get(tree)
        if state is not None:
            logits, sig = self._gumbel_terms(root, priors, visits)
            improved = improved_policy(logits, sig)
            result = dataclasses.replace(result, improved=improved, chosen=state.survivor(logits, sig, visits))
            if self.cfg.gumbel_root_value == "improved" and visits.any():
                value = improved_value(improved, f.child_q(root), visits, priors, f.raw_value(root))
                result = dataclasses.replace(result, value=value)
        elif f.rules.mate_in_one and len(moves) and (mate := f.mating_edge(root)) is not None:
            result = dataclasses.replace(result, chosen=mate, value=PROVEN_WIN)  # PUCT: a proven win, whatever was visited
        if pv_length:
            pv = [moves[result.best]]
            node = f.child_of(root, result.best)
            while node >= 0 and f.is_expanded(node) and len(pv) < pv_length:
                p, v, m = f.children(node)
                if not v.any():
                    break
                j = int(np.lexsort((-p, -v))[0])
                pv.append(m[j])
                node = f.child_of(node, j)
            result = dataclasses.replace(result, pv=tuple(pv))
        return result

    def _gumbel_terms(self, root: int, priors: np.ndarray, visits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(prior logits [A], sigma of the completed Q-values [A]) of a root."""
        f = self.forest
        return log_priors(priors), sigma(f.child_q(root), visits, priors, f.raw_value(root), self.cfg.gumbel_c_visit,
                                         self.cfg.gumbel_c_scale)

    def _root_choice(self, trees: Sequence[Tree]) -> np.ndarray | None:
        """[len(trees)] the move each Gumbel root visits next (sequential halving), -1 for the others."""
        if not self._gumbel:
            return None
        choice = np.full(len(trees), -1, dtype=np.int64)
        f = self.forest
        for i, tree in enumerate(trees):
            state = self._gumbel.get(tree)
            if state is not None:
                priors, visits = f.priors_and_visits(self._roots[tree])
                logits, sig = self._gumbel_terms(self._roots[tree], priors, visits)
                choice[i] = state.next_move(logits, sig, visits)
        return choice

    # -- simulations -------------------------------------------------------------------------------------
    def prepare(self, trees: Sequence[Tree], root_fpu: np.ndarray | None = None) -> PendingStep:
        """Select a leaf in each tree and encode the leaves that need the network (``pending.planes``, or None).
        ``root_fpu`` [len(trees)]: first-play-urgency reduction at each root (default mcts.fpu_reduction_root)."""
        pending = self._search.prepare([self._roots[t] for t in trees], root_fpu, self._root_choice(trees))
        self._pending.append(pending)
        return pending

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The evaluator's (logits, values) for ``planes`` and the seconds it took (safe on another thread)."""
        return self._search.evaluate(planes)

    def finish(self, pending: PendingStep, logits: np.ndarray | None, values: np.ndarray | None) -> None:
        """Expand the evaluated leaves of ``pending`` and back their values up its paths."""
        self._pending.remove(pending)
        self._search.finish(pending, logits, values)

    def step(self, trees: Sequence[Tree]) -> None:
        """One simulation in each tree (its first evaluation, for a root the network has not seen)."""
        pending = self.prepare(trees)
        if pending.planes is None:
            self.finish(pending, None, None)
        else:
            logits, values, seconds = self.evaluate(pending.planes)
            self.stats.t_network += seconds
            self.finish(pending, logits, values)

    def search(self, boards: Sequence[chess.Board], simulations: int, stop: Callable[[int], bool] | None = None,
               pv_length: int = 10, budget: int | None = None, max_nodes: int | None = None) -> list[SearchResult]:
        """Search every board at once, ``simulations`` each (``stop(done)``, checked between simulations, ends it
        early), and return their results. The trees are released. ``budget``: the simulations Gumbel's sequential
        halving plans for (default ``simulations``; a search stopped by the clock plans for this many). The search
        also ends once the forest holds ``max_nodes`` nodes (a bound on memory)."""
        trees = [self.open(b) for b in boards]
        results = self.search_trees(trees, simulations, stop, pv_length, budget, max_nodes)
        for t in trees:
            self.release(t)
        return results

    def search_trees(self, trees: Sequence[Tree], simulations: int, stop: Callable[[int], bool] | None = None,
                     pv_length: int = 10, budget: int | None = None, max_nodes: int | None = None) -> list[SearchResult]:
        """``search`` on open trees, which stay open. A tree kept from an earlier move (``advance``) keeps the
        visits it has and gets ``simulations`` + 1 more (a new root's first step is its expansion, a kept one's is a
        simulation)."""
        gumbel = self.cfg.algorithm == "gumbel"
        for t in trees:  # a kept root is expanded: its Gumbel search starts before its first simulation
            if gumbel and self.num_moves(t):
                self.start_gumbel(t, np.zeros(self.num_moves(t) or 0), budget or simulations)
        done = 0
        while True:
            self.step(trees)  # the first step expands the new roots; each later one is one simulation per root
            if done == 0 and gumbel:
                for t in trees:  # no noise: evaluation and UCI play the best move they find
                    if self.num_moves(t) and not self.gumbel_started(t):
                        self.start_gumbel(t, np.zeros(self.num_moves(t) or 0), budget or simulations)
            if done >= simulations or (stop is not None and stop(done)):
                break
            if max_nodes is not None and self.num_nodes >= max_nodes:
                break
            done += 1
        return [self.result(t, pv_length) for t in trees]

    # -- memory ------------------------------------------------------------------------------------------
    def compact(self, force: bool = False) -> bool:
        """Drop the nodes no tree can reach any more, once the forest has grown past its threshold (or when
        ``force``d); prepared steps follow. Returns whether it compacted. (The logits rows of dead subtrees went
        back to the pool at ``advance``/``release``: compacting for a full pool would free nothing.)"""
        if not force and self.forest.num_nodes <= self._compact_at:
            return False
        trees = list(self._roots)
        new_id = self.forest.compact([self._roots[t] for t in trees])
        for t in trees:
            self._roots[t] = int(new_id[self._roots[t]])
        for pending in self._pending:
            pending.remap(new_id)
        self._compact_at = max(self._compact_floor, 3 * self.forest.num_nodes)
        gc.collect()
        return True
