"""Players for evaluation matches. Each chooses moves for many boards at once (one call per round of a
match), so the network player searches all of its games in shared batches.

``choose`` returns one move per board, or ``None`` to resign that game.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol, Sequence

import chess
import numpy as np

from ..config import MCTSConfig
from ..game.rules import Rules, material_balance
from ..search.api import Tree, TreeSearch
from ..search.evaluator import Evaluator


class Player(Protocol):
    name: str

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]: ...

    def close(self) -> None: ...


class RandomPlayer:
    """Uniformly random legal moves: the ladder's anchor at Elo 0."""

    def __init__(self, seed: int, name: str = "random") -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        out: list[chess.Move | None] = []
        for b in boards:
            legal = list(b.legal_moves)
            out.append(legal[int(self.rng.integers(len(legal)))])
        return out

    def close(self) -> None:
        pass


class GreedyPlayer(RandomPlayer):
    """One ply of material: mate if it can, else the move that leaves it most material (ties at random)."""

    def __init__(self, seed: int, name: str = "greedy") -> None:
        super().__init__(seed, name)

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        out: list[chess.Move | None] = []
        for b in boards:
            sign = 1 if b.turn == chess.WHITE else -1
            best: list[chess.Move] = []
            best_score = -math.inf
            for move in b.legal_moves:
                b.push(move)
                score = math.inf if b.is_checkmate() else sign * material_balance(b)
                b.pop()
                if score > best_score:
                    best, best_score = [move], score
                elif score == best_score:
                    best.append(move)
            out.append(best[int(self.rng.integers(len(best)))])
        return out


class KeptTrees:
    """The trees of games in play, kept between a player's moves (``mcts.tree_reuse`` at play): after its move a
    game's tree is advanced and kept under the game's start and moves; at its next turn the tree is found by the
    position's moves but the last (the opponent's reply), advanced by that reply, and searched on with the visits
    its subtree already has. A game not seen at a turn has ended: its tree is released. The trees share one
    ``search`` (its own, with ``mcts.tree_reuse`` on, without which ``advance`` would not keep a subtree)."""

    def __init__(self, evaluator: Evaluator, mcts: MCTSConfig, rules: Rules) -> None:
        self.search = TreeSearch(evaluator, dataclasses.replace(mcts, tree_reuse=True), rules, evaluator.history)
        self._kept: dict[tuple, list[Tree]] = {}

    @staticmethod
    def _key(board: chess.Board, extra: Sequence[chess.Move] = ()) -> tuple:
        return (board.root().fen(), *board.move_stack, *extra)

    def trees(self, boards: Sequence[chess.Board], max_nodes: int | None = None) -> list[Tree]:
        """A tree for each board: its kept one advanced by the last move where there is one, else a new one. With
        ``max_nodes`` (a bound a search will stop at) the nodes no tree holds go now, and kept trees that fill the
        bound alone give way to new ones."""
        old, self._kept = self._kept, {}
        out = []
        for b in boards:
            kept = old.get(self._key(b)[:-1]) if b.move_stack else None
            tree = kept.pop() if kept else None
            if tree is not None and not (self.search.advance_move(tree, b.move_stack[-1])
                                         and self.search.terminal_value(tree) is None):
                self.search.release(tree)  # not in the tree, or a node the tree ended (a repetition): a new root
                tree = None
            out.append(self.search.open(b) if tree is None else tree)
        for trees in old.values():
            for tree in trees:
                self.search.release(tree)
        self.search.compact(force=max_nodes is not None)
        if max_nodes is not None and self.search.num_nodes >= max_nodes:
            for tree in out:
                self.search.release(tree)
            self.search.compact(force=True)
            out = [self.search.open(b) for b in boards]
        return out

    def keep(self, tree: Tree, board: chess.Board, move: chess.Move) -> None:
        """``board``'s player makes ``move``, one of the searched root's: keep the tree for the game's next turn."""
        if self.search.advance_move(tree, move):
            self._kept.setdefault(self._key(board, (move,)), []).append(tree)
        else:
            self.search.release(tree)

    def clear(self) -> None:
        for trees in self._kept.values():
            for tree in trees:
                self.search.release(tree)
        self._kept = {}
        self.search.compact(force=True)


class NetPlayer:
    """The network with the search and no exploration noise: plays the most visited move. With ``tree_reuse``
    (eval.tree_reuse) each game's tree is kept between its moves (``KeptTrees``): a move adds ``simulations`` to
    the visits the subtree of the position already had."""

    def __init__(self, evaluator: Evaluator, mcts: MCTSConfig, simulations: int, rules: Rules, name: str,
                 tree_reuse: bool = False) -> None:
        self.name = name
        self.evaluator = evaluator
        self.mcts = dataclasses.replace(mcts, dirichlet_epsilon=0.0)
        self.simulations = simulations
        self.rules = rules
        self._kept = KeptTrees(evaluator, self.mcts, rules) if tree_reuse else None

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        if not boards:
            return []
        if self._kept is None:
            search = TreeSearch(self.evaluator, self.mcts, self.rules, self.evaluator.history)
            return [r.best_move for r in search.search(boards, self.simulations, pv_length=0)]
        trees = self._kept.trees(boards)
        results = self._kept.search.search_trees(trees, self.simulations, pv_length=0)
        for tree, board, r in zip(trees, boards, results):
            self._kept.keep(tree, board, r.best_move)
        return [r.best_move for r in results]

    def close(self) -> None:
        if self._kept is not None:
            self._kept.clear()
