"""Self-play games: many at once in one process, their leaves evaluated together. No file IO here.

``SelfPlayEngine.play(specs)`` keeps ``games_in_flight`` games going, starting the next spec whenever one
finishes, and yields a ``GameRecord`` per finished game. Each game draws all its randomness (Dirichlet
noise, move sampling, playout caps, whether it may resign) from its own generator seeded by its spec, so a
game does not depend on which other games shared its batches.
"""

from __future__ import annotations

import gc
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import chess
import numpy as np

from ..config import Config
from ..game.encoding import PositionBatch, batch_from_chains, move_indices
from ..game.rules import ADJUDICATED, DRAWS_BY_RULE, MAX_PLIES, Rules, material_winner
from ..search.api import Tree, TreeSearch
from ..search.evaluator import Evaluator
from .plan import GameSpec


@dataclass
class GameRecord:
    """A finished game and its training rows (one per fully searched move).

    positions:     PositionBatch of the recorded positions (N rows).
    policy_counts: [N] int, non-zero entries of each row's search policy.
    policy_index:  [sum counts] int, move indices (see encoding); policy_prob the matching probabilities.
    root_value:    [N] float, search value of the root for the side to move.
    ply:           [N] int, ply of each recorded position.
    value_target:  [N] int8, final result for the side to move (+1 win, 0 draw, -1 loss).
    """

    spec: GameSpec
    positions: PositionBatch
    policy_counts: np.ndarray
    policy_index: np.ndarray
    policy_prob: np.ndarray
    root_value: np.ndarray
    ply: np.ndarray
    value_target: np.ndarray
    result: int  # +1 white won, 0 draw, -1 black won
    termination: str
    plies: int
    moves: list[chess.Move]
    playthrough: bool  # a game that was not allowed to resign
    would_resign: bool  # a playthrough game where a side would have resigned
    resign_false_positive: bool  # ... and that side did not lose

    @property
    def num_positions(self) -> int:
        return len(self.ply)

    @property
    def plies_left(self) -> np.ndarray:
        return (self.plies - self.ply).astype(np.uint16)


@dataclass
class _Game:
    spec: GameSpec
    rng: np.random.Generator
    board: chess.Board
    tree: Tree
    playthrough: bool
    target: int = 0
    full: bool = True
    needs_noise: bool = False  # root noise (Dirichlet, or Gumbel's start) waits for the root's expansion
    simulations: int = 0  # this move's budget
    below: list[int] = field(default_factory=lambda: [0, 0])  # consecutive low root values, [black, white]
    would_resign: list[bool] = field(default_factory=lambda: [False, False])
    chains: list[tuple] = field(default_factory=list)
    pol_idx: list[list[int]] = field(default_factory=list)
    pol_prob: list[np.ndarray] = field(default_factory=list)
    root_values: list[float] = field(default_factory=list)
    plies_rec: list[int] = field(default_factory=list)
    turns_rec: list[bool] = field(default_factory=list)


class _Reply:
    """A request out to an evaluator that answers later: ``result`` waits for it, timed like ``evaluate``."""

    def __init__(self, wait: Callable[[], tuple[np.ndarray, np.ndarray]]) -> None:
        self._wait = wait

    def result(self) -> tuple[np.ndarray, np.ndarray, float]:
        t0 = time.perf_counter()
        logits, values = self._wait()
        return logits, values, time.perf_counter() - t0


def group_widths(games_in_flight: int, pipeline: bool) -> tuple[int, int]:
    """Games in each of the two groups; a group's leaves are one network request (one group without pipeline)."""
    return (games_in_flight - games_in_flight // 2, games_in_flight // 2) if pipeline else (games_in_flight, 0)


class SelfPlayEngine:
    def __init__(self, evaluator: Evaluator, cfg: Config) -> None:
        self.cfg = cfg
        sp = cfg.selfplay
        self.rules = Rules(sp.repetitions_for_draw, sp.no_progress_plies, sp.max_plies, cfg.mcts.mate_in_one)
        self.search = TreeSearch(evaluator, cfg.mcts, self.rules, cfg.model.history)
        self.gumbel = cfg.mcts.algorithm == "gumbel"
        self.pipeline = cfg.selfplay.pipeline
        self._width = group_widths(cfg.selfplay.games_in_flight, self.pipeline)
        self.groups: tuple[list[_Game], list[_Game]] = ([], [])
        self._turn = 0
        self._inflight: tuple | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azhpc-eval")
        self._send = getattr(evaluator, "submit", None)  # an evaluator that answers later (the search pool's)
        self.positions_recorded = 0
        self._pending: Iterator[GameSpec] = iter(())

    def _start(self, spec: GameSpec) -> _Game:
        rng = np.random.default_rng(spec.seed)
        board = chess.Board()
        game = _Game(spec=spec, rng=rng, board=board, tree=self.search.open(board),
                     playthrough=bool(rng.random() < self.cfg.selfplay.resign_playthrough))
        self._begin_move(game)
        return game

    def _begin_move(self, game: _Game) -> None:
        m = self.cfg.mcts
        game.full = bool(game.rng.random() < m.full_search_prob)
        game.simulations = m.simulations if game.full else m.fast_simulations
        game.target = max(self.search.root_visits(game.tree), 1) + game.simulations
        game.needs_noise = self.gumbel or (game.full and m.dirichlet_epsilon > 0)
        self._maybe_noise(game)

    def _maybe_noise(self, game: _Game) -> None:
        """Once the root is expanded: Dirichlet noise on its priors (PUCT), or Gumbel noise and the start of the
        move's sequential halving (Gumbel; the noise is scaled by the move's temperature, so temperature 0
        plays the best move the search finds and temperature 1 samples as the prior would)."""
        moves = self.search.num_moves(game.tree) if game.needs_noise else None
        if moves is None:
            return
        m, sp = self.cfg.mcts, self.cfg.selfplay
        if self.gumbel:
            temp = sp.temperature if game.board.ply() < sp.temperature_plies else sp.final_temperature
            self.search.start_gumbel(game.tree, game.rng.gumbel(size=moves) * temp, game.simulations)
        else:
            noise = game.rng.dirichlet(np.full(moves, m.dirichlet_alpha))
            self.search.add_noise(game.tree, noise.astype(np.float32), m.dirichlet_epsilon)
        game.needs_noise = False

    @property
    def active(self) -> list[_Game]:
        return self.groups[0] + self.groups[1]

    def play(self, specs: Iterable[GameSpec]) -> Iterator[GameRecord]:
        """Play every spec, ``games_in_flight`` at a time; yield each game when it ends."""
        self.start(specs)
        try:
            while self.busy:
                yield from self.step()
        finally:
            self.close()

    @property
    def busy(self) -> bool:
        """Games in flight or a network call pending: ``step`` has more to do."""
        return bool(self.groups[0] or self.groups[1] or self._inflight)

    def start(self, specs: Iterable[GameSpec]) -> None:
        """Queue ``specs``; ``step`` starts them as slots free up."""
        self._pending = iter(specs)
        self._fill(0)
        self._fill(1)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _fill(self, group: int) -> None:
        games = self.groups[group]
        while len(games) < self._width[group]:
            spec = next(self._pending, None)
            if spec is None:
                break
            games.append(self._start(spec))

    def step(self) -> list[GameRecord]:
        """Advance the search by one round for one group of games; returns the games that ended.

        With ``pipeline`` the games form two groups: while the network evaluates one group's leaves (on a
        helper thread, as torch releases the GIL, or in the search pool's server process), this thread backs
        up the other group's values, plays its moves and selects its next leaves. Each game's search is the
        same either way.

        The cyclic garbage collector is paused while searching: scanning a large tree of python-chess
        objects triples the cost of move generation (see docs/performance.md). It runs at compaction.
        """
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._step()
        finally:
            if gc_was_enabled:
                gc.enable()

    def _step(self) -> list[GameRecord]:
        m = self.cfg.mcts
        group = self._turn
        if self.pipeline:
            self._turn ^= 1
        games = self.groups[group]
        submitted = None
        if games:
            fpu = np.array([m.fpu_reduction_root if g.full else m.fpu_reduction for g in games], np.float32)
            pending = self.search.prepare([g.tree for g in games], fpu)
            if pending.planes is None:
                answer = None
            elif self.pipeline:
                answer = self._submit(pending.planes, group)
            else:  # nothing to overlap: a hop to the helper thread and back would only cost two wake-ups
                answer = Future()
                answer.set_result(self.search.evaluate(pending.planes))
            submitted = (group, pending, answer)
        previous, self._inflight = self._inflight, None
        if not self.pipeline:
            previous, submitted = submitted, None
        finished = self._complete(previous) if previous else []
        self._inflight = submitted
        if previous:
            self._fill(previous[0])
        self.search.compact()
        return finished

    def _submit(self, planes: np.ndarray, group: int) -> "Future | _Reply":
        """Start the network call for a group's leaves. An evaluator that can send a request without waiting
        (the search pool's) gets it directly; any other is called on the helper thread."""
        if self._send is None:
            return self._pool.submit(self.search.evaluate, planes)
        return _Reply(self._send(planes, group))

    def _complete(self, step: tuple) -> list[GameRecord]:
        """Take the network's answer for a group, back it up and play the moves whose search is done."""
        group, pending, answer = step
        if answer is not None:
            logits, values, seconds = answer.result()
            self.search.stats.t_network += seconds
            self.search.finish(pending, logits, values)
        else:
            self.search.finish(pending, None, None)
        games = self.groups[group]
        finished: list[GameRecord] = []
        keep: list[_Game] = []
        for g in games:
            if g.needs_noise:
                self._maybe_noise(g)
            record = self._move(g) if self.search.root_visits(g.tree) >= g.target else None
            if record is None:
                keep.append(g)
            else:
                self.search.release(g.tree)
                finished.append(record)
        games[:] = keep
        return finished

    def _move(self, g: _Game) -> GameRecord | None:
        """Play the searched move of ``g``; returns its record if the game is over."""
        sp = self.cfg.selfplay
        result = self.search.result(g.tree)
        visits, moves = result.visits, result.moves
        turn = g.board.turn
        ply = g.board.ply()
        q = result.value
        if g.full:
            if result.improved is not None:  # Gumbel: the improved policy over every legal move
                g.pol_idx.append(move_indices(list(moves), turn))
                g.pol_prob.append(result.improved)
            else:  # PUCT: the visit distribution (a proven mate in one, result.chosen: the mate)
                target = result.policy_target
                nz = np.flatnonzero(target)
                g.pol_idx.append(move_indices([moves[i] for i in nz], turn))
                g.pol_prob.append(target[nz])
            g.chains.append(self.search.position(g.tree))
            g.root_values.append(q)
            g.plies_rec.append(ply)
            g.turns_rec.append(turn)
            self.positions_recorded += 1
        # Resignation: the side to move gives up after resign_consecutive low values in a row.
        if sp.resign_threshold > -1.0 and q < sp.resign_threshold:
            g.below[turn] += 1
            if g.below[turn] >= sp.resign_consecutive:
                if not g.playthrough:
                    return self._finish(g, result=-1 if turn else 1, termination="resignation")
                g.would_resign[turn] = True
        else:
            g.below[turn] = 0
        temp = sp.temperature if ply < sp.temperature_plies else sp.final_temperature
        if result.chosen is not None:  # Gumbel's survivor (its noise already carried the temperature), PUCT's mate in one
            k = result.chosen
        elif temp <= 0:
            k = int(np.argmax(visits))
        else:
            p = visits.astype(np.float64) ** (1.0 / temp)
            k = int(g.rng.choice(len(p), p=p / p.sum()))
        g.board.push(moves[k])
        self.search.advance(g.tree, k)
        term = self.search.terminal_value(g.tree)
        if term is not None:
            side = 1 if g.board.turn else -1  # the side to move at the terminal position
            outcome, termination = int(round(term)) * side, self.rules.termination(g.board, self.search.repetitions(g.tree))
            value_result = None
            if termination == MAX_PLIES or (termination in DRAWS_BY_RULE and sp.adjudicate_rule_draws):
                winner = material_winner(g.board, sp.adjudicate_material)
                if winner:
                    outcome, termination = winner, ADJUDICATED
                    # A mate is always a win; a game won on material teaches a win only this often, else a draw.
                    if g.rng.random() >= sp.adjudicated_win_share:
                        value_result = 0
            return self._finish(g, result=outcome, termination=termination, value_result=value_result)
        self._begin_move(g)
        return None

    def snapshot(self) -> list[GameRecord]:
        """Records of the games in flight as if they ended in a draw now (for measuring storage)."""
        return [self._finish(g, 0, "unfinished") for g in self.active if g.chains]

    def _finish(self, g: _Game, result: int, termination: str, value_result: int | None = None) -> GameRecord:
        """The record of ``g``, ended with ``result`` (White's view); its positions' value targets follow
        ``value_result`` where given (an adjudicated win taught as a draw), else ``result``."""
        n = len(g.chains)
        value_result = result if value_result is None else value_result
        history = self.cfg.model.history
        positions = batch_from_chains(g.chains, history) if n else batch_from_chains([], history)
        turns = np.array(g.turns_rec, dtype=bool)
        value_target = np.where(turns, value_result, -value_result).astype(np.int8) if n else np.zeros(0, np.int8)
        counts = np.array([len(i) for i in g.pol_idx], dtype=np.int64)
        loser_would_resign = [g.would_resign[chess.BLACK], g.would_resign[chess.WHITE]]
        false_positive = (loser_would_resign[1] and result != -1) or (loser_would_resign[0] and result != 1)
        return GameRecord(
            spec=g.spec,
            positions=positions,
            policy_counts=counts,
            policy_index=np.array([i for row in g.pol_idx for i in row], dtype=np.uint16),
            policy_prob=np.concatenate(g.pol_prob).astype(np.float32) if n else np.zeros(0, np.float32),
            root_value=np.array(g.root_values, dtype=np.float32),
            ply=np.array(g.plies_rec, dtype=np.int64),
            value_target=value_target,
            result=result,
            termination=termination,
            plies=g.board.ply(),
            moves=list(g.board.move_stack),
            playthrough=g.playthrough,
            would_resign=any(g.would_resign),
            resign_false_positive=bool(false_positive),
        )
