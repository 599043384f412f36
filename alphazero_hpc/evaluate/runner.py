"""``azhpc evaluate``: one generation's network against one opponent, recorded in the ledger with its PGN."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, cast

from ..store import atomic
from ..cluster.slurmenv import SlurmEnv
from ..config import Config
from ..errors import AzhpcError, CheckpointError
from ..net.precision import cpu_model
from ..game.rules import ADJUDICATED, Rules, search_rules
from ..store.paths import RunPaths
from .elo import MatchScore, format_elo
from .ledger import LedgerEntry, PlaySetup, append_entry, find_entry
from .match import openings_from_spec, play_match
from .engines import EnginePlayer, canonical_engine_name, is_engine_spec, parse_engine, plays_per_game
from .players import GreedyPlayer, NetPlayer, Player, RandomPlayer


@dataclass(frozen=True)
class MatchPlan:
    player: str  # canonical ladder name of the first player: gen:K, or an engine rung when engines meet
    opponent: str  # canonical ladder name: gen:K, random, greedy, stockfish:..., fairy-stockfish:...
    games: int
    setup: PlaySetup  # how the network players search (simulations 0 when none plays)
    openings: str
    seed: int
    max_plies: int
    adjudicate_material: int = 0
    # every engine gets a process per game, depth 1 too (docs/calibration/depth1_check.py's control arm)
    every_engine_per_game: bool = False

    @property
    def generation(self) -> int | None:
        """The first player's generation, or None for a match between engines (ladder calibration)."""
        return int(self.player[4:]) if self.player.startswith("gen:") else None

    @property
    def key(self) -> str:
        return (f"{self.player}|{self.opponent}|games={self.games}|sims={self.setup.simulations}|openings={self.openings}"
                f"|seed={self.seed}|max_plies={self.max_plies}"
                + (f"|adjudicate_material={self.adjudicate_material}" if self.adjudicate_material else "")
                + self.setup.key_flags()
                # a new identity since each game has had its own engine process: a block played before is not this one
                + ("|engine_per_game" if self.engine_per_game else ""))

    @property
    def engine_per_game(self) -> bool:
        """An engine of this match plays each game in its own process (``EnginePlayer``)."""
        return any(map(self.engine_plays_per_game, (self.player, self.opponent)))

    def engine_plays_per_game(self, name: str) -> bool:
        """Whether player ``name``, if an engine, gets a process per game in this match."""
        return plays_per_game(name) or (self.every_engine_per_game and is_engine_spec(name))

    @property
    def pgn_name(self) -> str:
        def slug(name: str) -> str:
            return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")

        # readable, and one file per match: two matches that differ only in games, simulations, openings or scoring
        # (same opponent and seed) would otherwise write the same PGN, the second over the first's games
        first = "" if self.generation is not None else slug(self.player) + "-"
        digest = hashlib.sha1(self.key.encode()).hexdigest()[:8]
        return (first + "vs-" + slug(self.opponent) + f"-s{self.seed}" + (f"-{self.setup.search}{self.setup.simulations}" if self.setup.search else "")
                + f"-{digest}")


def canonical_opponent(spec: str, generation: int) -> str:
    """The ladder name of an opponent given on the command line or in eval.opponents."""
    spec = spec.strip()
    if spec == "previous":
        if generation == 0:
            raise AzhpcError("opponent 'previous': generation 0 has no previous network; use gen:K, random, greedy or stockfish")
        return f"gen:{generation - 1}"
    if spec in ("random", "greedy"):
        return spec
    if re.fullmatch(r"gen:\d+", spec):
        return f"gen:{int(spec[4:])}"
    if is_engine_spec(spec):
        return canonical_engine_name(spec)
    raise AzhpcError(f"unknown opponent '{spec}': use previous, gen:K, random, greedy, "
                     "stockfish[:skill=S][,elo=E][,nodes=N|depth=D|movetime=MS|tc=BASE+INC] or fairy-stockfish[:...]")


def _net_player(paths: RunPaths, cfg: Config, generation: int, setup: PlaySetup, rules: Rules, device: str) -> NetPlayer:
    from ..net.checkpoint import load_model
    from ..net.inference import TorchEvaluator, pick_device

    path = paths.model(generation)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} not found: generation {generation} has not been trained yet "
                              f"(azhpc status {paths.root} shows which have)")
    model, _ = load_model(path, expect=cfg.model)
    evaluator = TorchEvaluator(model, pick_device(device), cfg.mcts.precision, cfg.mcts.channels_last)
    evaluator.tune_threads()  # a rating beside other work on a small machine: one thread may be the faster
    return NetPlayer(evaluator, cfg.play_mcts(), setup.simulations, rules, f"gen:{generation}", setup.tree_reuse)


def make_player(name: str, paths: RunPaths, cfg: Config, plan: MatchPlan, rules: Rules, device: str,
                  engines: Mapping[str, str | None] | None = None) -> Player:
    """The player that ladder name ``name`` stands for (``engines``: engine name -> binary path, None: the default)."""
    seed = plan.seed * 1_000_003 + (plan.generation or 0)
    if name == "random":
        return RandomPlayer(seed)
    if name == "greedy":
        return GreedyPlayer(seed)
    if name.startswith("gen:"):
        return _net_player(paths, cfg, int(name[4:]), plan.setup, rules, device)
    return EnginePlayer(parse_engine(name), engines, per_game=plan.engine_plays_per_game(name))


def evaluate(run_dir: Path, cfg: Config, generation: int, opponent: str, games: int | None = None,
             simulations: int | None = None, openings: str | None = None, seed: int = 0, max_plies: int | None = None,
             device: str = "auto", stockfish: str | None = None, adjudicate_material: int | None = None,
             echo: Callable[[str], None] = lambda s: None, fairy_stockfish: str | None = None) -> tuple[LedgerEntry, bool]:
    """Play generation ``generation`` against ``opponent`` unless the ledger has that match; returns (its entry,
    whether it was played now)."""
    ev, setup = cfg.eval, PlaySetup.of_config(cfg, simulations)
    plan = MatchPlan(f"gen:{generation}", canonical_opponent(opponent, generation), games or ev.games, setup,
                     openings or ev.openings, seed, max_plies or ev.max_plies,
                     ev.adjudicate_material if adjudicate_material is None else adjudicate_material)
    if plan.opponent == plan.player:
        raise AzhpcError(f"generation {generation} cannot play itself: choose another opponent")
    return play_recorded(RunPaths(run_dir), cfg, plan, device, {"stockfish": stockfish, "fairy-stockfish": fairy_stockfish},
                         echo)


PROGRESS_EVERY_S = 120.0  # a block's heartbeat: its 16 games against the anchor's 60+0.6 end only after ~25 minutes


def play_recorded(paths: RunPaths, cfg: Config, plan: MatchPlan, device: str = "auto",
                  engines: Mapping[str, str | None] | None = None,
                  echo: Callable[[str], None] = lambda s: None) -> tuple[LedgerEntry, bool]:
    """Play ``plan`` unless the ledger has it, save its PGN and append it to the ledger; returns (its entry,
    whether it was played now). ``cfg`` sizes the network players and how many games run at once."""
    done = find_entry(paths, plan.key)
    if done is not None:
        return done, False
    rules = search_rules(plan.max_plies + 2, plan.setup.mate_in_one)
    book = openings_from_spec(plan.openings, plan.games, plan.seed)
    player = make_player(plan.player, paths, cfg, plan, rules, device, engines)
    try:
        rival = make_player(plan.opponent, paths, cfg, plan, rules, device, engines)
    except BaseException:
        player.close()
        raise
    t0, load = time.perf_counter(), os.getloadavg()[0]
    tally: Counter[float] = Counter()

    def on_game(o) -> None:
        tally[o.first_points] += 1
        echo(f"  game {sum(tally.values())}/{plan.games}: {plan.player} {'white' if o.first_is_white else 'black'} "
             f"{o.result} ({o.termination}, {o.plies} plies) | +{tally[1.0]} ={tally[0.5]} -{tally[0.0]}")

    last_word = [t0]

    def on_moves(in_play: int, moves: int) -> None:  # a line at most every PROGRESS_EVERY_S, between games' ends
        now = time.perf_counter()
        if now - last_word[0] >= PROGRESS_EVERY_S:
            last_word[0] = now
            echo(f"  {(now - t0) / 60:.0f} min: {sum(tally.values())}/{plan.games} games over, {in_play} in play, "
                 f"{moves} moves played")

    try:
        # an engine with a process per game has at most max_processes: no more games at once than that, or their
        # processes would pass from game to game, each taking one with a new game (ucinewgame) at every move
        parallel = min([cfg.eval.parallel] + [p.max_processes for p in (player, rival)
                                               if isinstance(p, EnginePlayer) and p.per_game])
        outcomes = play_match(player, rival, plan.games, book, plan.max_plies, parallel=parallel,
                              event=f"azhpc evaluate {paths.root.name}", adjudicate_material=plan.adjudicate_material,
                              on_game=on_game, on_moves=on_moves)
    finally:
        player.close()
        rival.close()
    seconds = time.perf_counter() - t0
    pgn_path = paths.eval_pgn(plan.generation, plan.pgn_name)
    atomic.write_text(pgn_path, "\n".join(o.pgn for o in outcomes), doing="writing the evaluation PGN")
    score = MatchScore.from_points(o.first_points for o in outcomes)
    if plan.adjudicate_material:  # the same games under chess rules only: adjudicated games are draws
        rules_only = MatchScore.from_points(0.5 if o.termination.startswith(ADJUDICATED) else o.first_points
                                            for o in outcomes).summary()
    overruns = sum(getattr(p, "overruns", 0) for p in (player, rival))
    # score.summary()'s and entry_fields()' keys are LedgerEntry's (plain dicts: mypy cannot check ** into a TypedDict)
    entry = cast(LedgerEntry, {
        "key": plan.key, "player": plan.player, "opponent": plan.opponent, "generation": plan.generation,
        "simulations": plan.setup.simulations, "openings": plan.openings, "seed": plan.seed, "max_plies": plan.max_plies,
        "adjudicate_material": plan.adjudicate_material,
        **({"rules_only": rules_only} if plan.adjudicate_material else {}),
        **plan.setup.entry_fields(),
        **score.summary(),
        "mean_plies": round(sum(o.plies for o in outcomes) / len(outcomes), 1),
        "terminations": dict(Counter(o.termination for o in outcomes)),
        **({"clock_overruns": overruns} if overruns else {}),
        **({"engine_per_game": True} if plan.engine_per_game else {}),
        "seconds": round(seconds, 1), "pgn": str(pgn_path.relative_to(paths.root)),
        # how busy the machine was (1-minute load average at the start and the end): timed engines weaken with it
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpu": cpu_model(),
        "slurm_job_id": SlurmEnv.now().job_id or None,
    })
    added = append_entry(paths, entry)
    return (entry if added else find_entry(paths, plan.key) or entry), added


def describe(entry: LedgerEntry) -> str:
    """One line: who played whom, W/D/L, score, Elo with its interval, LOS."""
    s = entry["score"]
    lo, hi = format_elo(entry["elo_low"], 0.0), format_elo(entry["elo_high"], 1.0)
    return (f"{entry['player']} vs {entry['opponent']}: +{entry['wins']} ={entry['draws']} -{entry['losses']} "
            f"({entry['games']} games, score {s:.3f}), Elo {format_elo(entry['elo'], s)} [95% {lo}, {hi}], "
            f"LOS {100 * entry['los']:.1f}%, {entry['simulations']} sims/move"
            + (f" ({entry['search'].upper()})" if entry.get("search") else "")
            + (f", prior temperature {entry['policy_temperature']:g}" if entry.get("policy_temperature", 1.0) != 1.0 else "")
            + (", tree reuse" if entry.get("tree_reuse") else "")
            + (f", draws by rule with >= {entry['adjudicate_material']} material ahead scored as wins"
               if entry.get("adjudicate_material") else ""))


class RecordingPool:
    """``play_recorded`` in ``workers`` processes at once (``azhpc evaluate --scale --jobs``). Each process is
    spawned fresh (no CUDA context, engine or open file is forked), runs torch on its share of the cores
    (``AZHPC_TORCH_THREADS``, unless set), appends each block to the ledger under the ledger's lock as it finishes,
    and exits when its parent is gone (a killed rating leaves no worker behind). If a worker dies, the pool stops:
    the blocks in flight are lost, those in the ledger count when the rating runs again. ``play(..., progress=P)``:
    the worker prints a line per game as it ends, after P, to the standard output it shares with its parent."""

    def __init__(self, workers: int, threads: int | None = None) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        threads = threads or max(1, cores // workers)
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_recording_worker, initargs=(threads, os.getpid()))

    def play(self, paths: RunPaths, cfg: Config, plan: MatchPlan, device: str = "auto",
             engines: Mapping[str, str | None] | None = None, progress: str | None = None) -> LedgerEntry:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self._pool.submit(_play_in_worker, str(paths.root), cfg, plan, device, dict(engines or {}),
                                     progress).result()
        except BrokenProcessPool as exc:
            raise AzhpcError(f"a process playing {plan.player} against {plan.opponent} died ({exc}): run the command "
                             "again; the blocks already in the ledger count") from exc

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def _recording_worker(threads: int, parent: int) -> None:
    """A pool worker's start: its torch threads, and a watch that ends it once its parent is gone (a worker of a
    killed parent would otherwise finish its block and then wait for work forever)."""
    import threading

    os.environ.setdefault("AZHPC_TORCH_THREADS", str(threads))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, name="azhpc-parent-watch", daemon=True).start()


def _play_in_worker(root: str, cfg: Config, plan: MatchPlan, device: str, engines: dict[str, str | None],
                    progress: str | None = None) -> LedgerEntry:
    def echo(line: str) -> None:
        if progress is not None:  # one write per line, flushed: the workers' lines interleave whole
            sys.stdout.write(f"{progress}{line.strip()}\n")
            sys.stdout.flush()
    return play_recorded(RunPaths(Path(root)), cfg, plan, device, engines, echo)[0]
