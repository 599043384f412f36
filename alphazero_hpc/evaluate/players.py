"""Players for evaluation matches. Each chooses moves for many boards at once (one call per round of a
match), so the network player searches all of its games in shared batches.

``choose`` returns one move per board, or ``None`` to resign that game.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Protocol, Sequence

import chess
import numpy as np

from ..config import MCTSConfig
from ..errors import AzhpcError
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


def find_stockfish(path: str | None = None) -> str:
    """The stockfish binary, or an AzhpcError saying how to install it."""
    for candidate in ([path] if path else ["stockfish", "/usr/games/stockfish"]):
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    where = f" at {path}" if path else " on PATH or in /usr/games"
    raise AzhpcError(f"stockfish not found{where}: install it (Debian/Ubuntu: apt-get install stockfish) or pass "
                     "--stockfish PATH; the opponents random, greedy, previous and gen:K work without it")


class StockfishPlayer:
    """Stockfish over UCI (python-chess's engine module), at a skill level and/or a fixed node count."""

    def __init__(self, skill: int | None, nodes: int | None, depth: int | None, name: str, path: str | None = None) -> None:
        import chess.engine

        self.name = name
        self.limit = chess.engine.Limit(nodes=nodes, depth=depth)
        binary = find_stockfish(path)
        try:
            self.engine = chess.engine.SimpleEngine.popen_uci(binary)
            options: dict[str, int] = {"Threads": 1, "Hash": 16}
            if skill is not None:
                options["Skill Level"] = skill
            self.engine.configure(options)
        except (chess.engine.EngineError, OSError) as exc:
            raise AzhpcError(f"stockfish at {binary} did not start ({exc}): check the binary or pass --stockfish PATH") from exc

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        out: list[chess.Move | None] = []
        for b in boards:
            result = self.engine.play(b, self.limit)
            out.append(None if result.resigned else result.move)
        return out

    def close(self) -> None:
        self.engine.quit()


def parse_stockfish(spec: str) -> tuple[int | None, int | None, int | None]:
    """``stockfish[:skill=S][,nodes=N][,depth=D]`` -> (skill, nodes, depth); default 2000 nodes."""
    values: dict[str, int] = {}
    _, _, rest = spec.partition(":")
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in ("skill", "nodes", "depth") or not value.isdigit():
            raise AzhpcError(f"opponent '{spec}': expected stockfish[:skill=0..20][,nodes=N][,depth=D], e.g. stockfish:skill=3")
        values[key] = int(value)
    if "skill" in values and not 0 <= values["skill"] <= 20:
        raise AzhpcError(f"opponent '{spec}': stockfish skill must be in 0..20")
    if "nodes" not in values and "depth" not in values:
        values["nodes"] = 2000
    return values.get("skill"), values.get("nodes"), values.get("depth")


def stockfish_name(spec: str) -> str:
    """A canonical ladder name for a Stockfish setting (the order of its options does not matter)."""
    skill, nodes, depth = parse_stockfish(spec)
    parts = [f"skill={skill}"] if skill is not None else []
    parts += [f"nodes={nodes}"] if nodes is not None else []
    parts += [f"depth={depth}"] if depth is not None else []
    return "stockfish:" + ",".join(parts)

