"""``azhpc uci``: the trained network as a UCI engine, so any chess GUI or match runner can play it.

Understood: uci, debug, isready, setoption (Simulations, MoveTime, MaxNodes, TreeReuse), ucinewgame, position startpos|fen ...
[moves ...], go [nodes N] [movetime MS] [wtime/btime/winc/binc/movestogo] [infinite], stop, quit.
The search runs on its own thread; this thread keeps reading, so ``isready`` and ``stop`` are answered
while it searches. "nodes" counts simulations. Simulations set on purpose (``azhpc uci --simulations N`` or
``setoption name Simulations``) are the most a move searches under a clock or a movetime too, which only end it
sooner: the network plays as it was rated at N on any machine and any clock that leaves it the time; left at the
default, a clock or a movetime alone decides. With TreeReuse (``azhpc uci --tree-reuse``, eval.tree_reuse) the
tree of the last search is kept and found again when the next position is the one after the engine's move and one
reply: a "go nodes N" then adds N simulations to the visits that position already had.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from pathlib import Path
from typing import IO

import chess

from ..config import Config, MCTSConfig
from ..game.rules import Rules, search_rules
from ..search.api import TreeSearch
from ..search.evaluator import Evaluator
from .players import KeptTrees

NAME = "azhpc"
# A search stops growing its tree here (each node holds a compiled position, its moves and statistics), so that
# "go infinite" left running does not take the machine's memory; UCI option MaxNodes changes it.
MAX_NODES = 200_000
# Simulations per move when neither azhpc uci --simulations nor go says how long to search.
DEFAULT_SIMULATIONS = 200


def time_budget(board: chess.Board, args: dict[str, int]) -> float | None:
    """Seconds to spend from go's clock arguments: a share of the remaining time plus half the increment."""
    if "movetime" in args:
        return args["movetime"] / 1000.0
    mine, inc = ("wtime", "winc") if board.turn == chess.WHITE else ("btime", "binc")
    if mine not in args:
        return None
    left = max(args[mine], 0) / 1000.0
    moves_to_go = args.get("movestogo", 30)
    budget = left / max(moves_to_go, 1) + args.get(inc, 0) / 2000.0
    return max(0.01, min(budget, left - 0.05, left * 0.5))


def score_cp(q: float) -> int:
    """Centipawns for UCI from the root value q in [-1, 1] (the logistic used for Elo: q=0.5 ~ +190 cp)."""
    q = max(min(q, 0.999), -0.999)
    return int(round(400 * math.log10((1 + q) / (1 - q))))


class UciEngine:
    def __init__(self, evaluator: Evaluator, mcts: MCTSConfig, rules: Rules, simulations: int, movetime_ms: int | None,
                 out: IO[str], name: str, tree_reuse: bool = False, fixed_simulations: bool = False) -> None:
        self.evaluator, self.rules = evaluator, rules
        self.max_nodes = MAX_NODES
        self.mcts = dataclasses.replace(mcts, dirichlet_epsilon=0.0)  # no exploration noise when playing
        self._kept: KeptTrees | None = None  # the kept tree, with TreeReuse
        self.tree_reuse = tree_reuse
        self.simulations = simulations
        self.fixed_simulations = fixed_simulations  # simulations chosen on purpose: they cap a clocked search too
        self.movetime_ms = movetime_ms
        self.out = out
        self.name = name
        self.board = chess.Board()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._infinite = False
        self._lock = threading.Lock()

    def send(self, line: str) -> None:
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    def run(self, lines: IO[str]) -> None:
        for raw in lines:
            if not self.handle(raw.strip()):
                break
        self._finish_search(stop=True)

    def handle(self, line: str) -> bool:
        """Act on one command; False on quit."""
        if not line:
            return True
        cmd, _, rest = line.partition(" ")
        if cmd == "uci":
            self.send(f"id name {self.name}")
            self.send("id author alphazero_hpc")
            self.send(f"option name Simulations type spin default {self.simulations} min 1 max 1000000")
            self.send(f"option name MoveTime type spin default {self.movetime_ms or 0} min 0 max 3600000")
            self.send(f"option name MaxNodes type spin default {self.max_nodes} min 1000 max 100000000")
            self.send(f"option name TreeReuse type check default {'true' if self.tree_reuse else 'false'}")
            self.send("uciok")
        elif cmd == "isready":
            self.send("readyok")
        elif cmd == "ucinewgame":
            self._finish_search()
            self.board = chess.Board()
            if self._kept is not None:
                self._kept.clear()
        elif cmd == "position":
            self._finish_search()
            self._position(rest)
        elif cmd == "go":
            self._finish_search()
            self._go(rest.split())
        elif cmd == "stop":
            self._finish_search(stop=True)
        elif cmd == "setoption":
            self._setoption(rest)
        elif cmd == "quit":
            return False
        elif cmd not in ("debug", "register", "ponderhit"):
            self.send(f"info string unknown command: {line}")
        return True

    def _position(self, rest: str) -> None:
        words = rest.split()
        try:
            if words[:1] == ["startpos"]:
                board, i = chess.Board(), 1
            elif words[:1] == ["fen"]:
                end = words.index("moves") if "moves" in words else len(words)
                board, i = chess.Board(" ".join(words[1:end])), end
            else:
                raise ValueError("expected 'startpos' or 'fen'")
            if words[i:i + 1] == ["moves"]:
                for uci in words[i + 1:]:
                    board.push_uci(uci)
        except (ValueError, IndexError) as exc:
            self.send(f"info string error: position {rest!r} not understood ({exc}); keeping the last position")
            return
        self.board = board

    def _setoption(self, rest: str) -> None:
        words = rest.split()
        if len(words) >= 4 and words[0] == "name" and "value" in words:
            name = " ".join(words[1:words.index("value")]).lower()
            value = words[words.index("value") + 1]
            if value.isdigit() and name == "simulations" and int(value) >= 1:
                self.simulations, self.fixed_simulations = int(value), True
                return
            if value.isdigit() and name == "movetime":
                self.movetime_ms = int(value) or None
                return
            if value.isdigit() and name == "maxnodes" and int(value) >= 1000:
                self.max_nodes = int(value)
                return
            if value.lower() in ("true", "false") and name == "treereuse":
                self.tree_reuse = value.lower() == "true"
                return
        self.send(f"info string error: setoption {rest!r} not understood")

    def _go(self, words: list[str]) -> None:
        args: dict[str, int] = {}
        infinite = "infinite" in words
        for key, value in zip(words, words[1:]):
            if key in ("nodes", "movetime", "wtime", "btime", "winc", "binc", "movestogo") and value.lstrip("-").isdigit():
                args[key] = int(value)
        board = self.board.copy()
        if board.is_game_over():
            self.send("bestmove 0000")
            return
        if infinite:
            sims, seconds = 10**9, None
        elif "nodes" in args:
            sims, seconds = max(1, args["nodes"]), time_budget(board, args)
        else:
            seconds = time_budget(board, args)
            if seconds is None and self.movetime_ms:
                seconds = self.movetime_ms / 1000.0
            sims = self.simulations if seconds is None or self.fixed_simulations else 10**9
        self._stop.clear()
        self._infinite = infinite
        self._thread = threading.Thread(target=self._search, args=(board, sims, seconds), daemon=True)
        self._thread.start()

    def _search(self, board: chess.Board, sims: int, seconds: float | None) -> None:
        t0 = time.monotonic()

        def stop(done: int) -> bool:
            return self._stop.is_set() or (seconds is not None and time.monotonic() - t0 >= seconds)

        try:
            if not self.tree_reuse:
                self._kept = None
                search = TreeSearch(self.evaluator, self.mcts, self.rules, self.evaluator.history)
                trees = [search.open(board)]
            else:
                self._kept = self._kept or KeptTrees(self.evaluator, self.mcts, self.rules)
                search = self._kept.search
                trees = self._kept.trees([board], self.max_nodes)  # MaxNodes counts the kept tree's nodes only
            before = search.root_visits(trees[0])  # visits the kept tree brought
            result = search.search_trees(trees, sims, stop=stop, budget=min(sims, self.simulations),
                                         max_nodes=self.max_nodes)[0]
            if self._kept:
                self._kept.keep(trees[0], board, result.best_move)
            if not math.isfinite(result.value):
                self.send("info string error: the network's values are not finite (NaN weights?); playing its first "
                          "legal move: check the checkpoint")
                self.send(f"bestmove {next(iter(board.legal_moves)).uci()}")
                return
            if self._infinite:  # the tree reached MaxNodes: UCI wants bestmove only after "stop"
                self._stop.wait()
            ms = int(1000 * (time.monotonic() - t0))
            nps = int((result.root_visits - before) / max(ms, 1) * 1000)
            self.send(f"info depth {len(result.pv)} nodes {result.root_visits} time {ms} nps {nps} score cp "
                      f"{score_cp(result.value)} pv {' '.join(m.uci() for m in result.pv)}")
            self.send(f"bestmove {result.best_move.uci()}")
        except Exception as exc:  # never leave a GUI waiting for bestmove
            self._kept = None  # nor a tree the failed search held
            self.send(f"info string error: search failed ({type(exc).__name__}: {exc})")
            self.send(f"bestmove {next(iter(board.legal_moves)).uci()}")

    def _finish_search(self, stop: bool = False) -> None:
        """Wait for a running search to answer; ``stop`` (or an infinite search) ends it now."""
        if self._thread is not None:
            if stop or self._infinite:
                self._stop.set()
            self._thread.join()
            self._thread = None


def run_uci(checkpoint: Path, simulations: int | None, movetime_ms: int | None, device: str,
            stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout, search: str | None = None,
            policy_temperature: float | None = None, tree_reuse: bool | None = None) -> None:
    from ..net.checkpoint import load_model
    from ..net.inference import TorchEvaluator, pick_device
    from ..store.paths import RunPaths
    from ..store.runconfig import read_run_config

    model, payload = load_model(checkpoint)
    cfg = Config()
    run = RunPaths.of_checkpoint(checkpoint)
    if run is not None:  # a network of a run folder searches with that run's settings (mcts, eval.algorithm and
        cfg = read_run_config(run)  # eval.policy_temperature)
    cfg = cfg.playing(search, policy_temperature, tree_reuse)  # --search: same is mcts.algorithm, as in azhpc evaluate
    mcts = cfg.play_mcts()
    evaluator = TorchEvaluator(model, pick_device(device), mcts.precision, mcts.channels_last)
    # One game's leaves are batches of a few positions, where torch's threads cost more than they share: on a 2-core
    # AMD EPYC (family 25 model 17) the recipe's 6x64 net took 5.3-7.6 s per 800-simulation move with torch's default
    # two threads and 2.5-2.9 s tuned (docs/evaluation.md, "UCI"). So, as in azhpc evaluate's matches, the count is
    # measured on the engine's own batches (one line on stderr); AZHPC_TORCH_THREADS fixes it instead.
    evaluator.tune_threads()
    name = f"{NAME} gen {payload.get('generation', '?')} ({model.cfg.blocks}x{model.cfg.filters})"
    UciEngine(evaluator, mcts, search_rules(10**6, mcts.mate_in_one), simulations or DEFAULT_SIMULATIONS, movetime_ms,
              stdout, name, cfg.eval.tree_reuse, fixed_simulations=simulations is not None).run(stdin)
