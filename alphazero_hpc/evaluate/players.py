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
from ..search.api import TreeSearch
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


class NetPlayer:
    """The network with the search and no exploration noise: plays the most visited move."""

    def __init__(self, evaluator: Evaluator, mcts: MCTSConfig, simulations: int, rules: Rules, name: str) -> None:
        self.name = name
        self.evaluator = evaluator
        self.mcts = dataclasses.replace(mcts, dirichlet_epsilon=0.0)
        self.simulations = simulations
        self.rules = rules

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        if not boards:
            return []
        search = TreeSearch(self.evaluator, self.mcts, self.rules, self.evaluator.history)
        return [r.best_move for r in search.search(boards, self.simulations, pv_length=0)]

    def close(self) -> None:
        pass
