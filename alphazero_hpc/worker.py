"""A self-play task: the function a SLURM array element (or ``azhpc selfplay``) runs.

It plays its share of a generation's games with the generation's network and leaves them as complete
shards. Started again with the same arguments (a requeue, a retry) it plays only the shards that are
missing; seeds derive from (run seed, generation, task, shard, game), so the rerun writes what the first
attempt would have.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import chess.pgn
import numpy as np

from . import fsutil
from .config import Config
from .cputhreads import warn_pipeline_on_cpu
from .errors import AzhpcError
from .mcts import Evaluator
from .paths import RunPaths
from .preempt import Deadline, Stop
from .progress import ProgressFile, TaskProgress, read_progress
from .run import resolve_run_config
from .selfplay import GameRecord, GameSpec, SelfPlayEngine
from .shards import SHARD_SCHEMA, read_sidecar, records_to_arrays, write_shard


@dataclass(frozen=True)
class TaskPlan:
    """The games and shards of one task."""

    games: int
    games_per_shard: int

    @property
    def shards(self) -> int:
        return -(-self.games // self.games_per_shard)

    def games_in_shard(self, shard: int) -> int:
        return min(self.games_per_shard, self.games - shard * self.games_per_shard)


def plan_task(cfg: Config, task: int, num_tasks: int) -> TaskPlan:
    if not 0 <= task < num_tasks:
        raise AzhpcError(f"task {task} is outside 0..{num_tasks - 1}: pass --task below --num-tasks")
    total = cfg.selfplay.games_per_generation
    games = total // num_tasks + (1 if task < total % num_tasks else 0)
    return TaskPlan(games=games, games_per_shard=cfg.selfplay.games_per_shard)


def game_seed(run_seed: int, generation: int, task: int, shard: int, index: int) -> int:
    return int(np.random.SeedSequence([run_seed, generation, task, shard, index]).generate_state(1, np.uint64)[0])


def game_specs(cfg: Config, generation: int, task: int, plan: TaskPlan, shards: Sequence[int]) -> Iterator[GameSpec]:
    for shard in shards:
        for index in range(plan.games_in_shard(shard)):
            yield GameSpec(shard=shard, index=index, seed=game_seed(cfg.run.seed, generation, task, shard, index))


class _Pacer:
    """Stops starting shards the task cannot finish before its job's time limit (less ``margin_s``), and
    everything on a stop signal. The first shard of an attempt always starts, so every attempt makes progress
    (or fails, at the time limit: an attempt that cannot finish one shard is not requeued forever)."""

    def __init__(self, deadline: Deadline | None, margin_s: float, progress: TaskProgress, plan: TaskPlan,
                 parallel: int = 1) -> None:
        self.deadline, self.margin_s, self.progress, self.plan = deadline, margin_s, progress, plan
        self.parallel = parallel  # processes sharing the games: one of them plays a shard this much slower
        self.t0 = time.monotonic()
        self.reason = ""

    def stopped(self) -> bool:
        if Stop.reason and not self.reason:
            self.reason = Stop.reason
        return bool(self.reason)

    def may_start(self, shard: int, first: bool) -> bool:
        if self.stopped():
            return False
        if first or self.deadline is None:
            return True
        games = self.progress.games_this_attempt
        per_game = (time.monotonic() - self.t0) / games if games else 0.0
        need = per_game * self.plan.games_in_shard(shard) * self.parallel + self.margin_s
        if self.deadline.remaining() < need:
            self.reason = (f"time limit: {self.deadline.remaining():.0f} s left, shard {shard} needs about "
                           f"{need - self.margin_s:.0f} s + slurm.stop_margin_s {self.margin_s:.0f} s")
            return False
        return True

    def specs(self, cfg: Config, generation: int, task: int, shards: Sequence[int]) -> Iterator[GameSpec]:
        for i, shard in enumerate(shards):
            if not self.may_start(shard, first=i == 0):
                return
            yield from game_specs(cfg, generation, task, self.plan, [shard])


def game_pgn(record: GameRecord, event: str) -> str:
    game = chess.pgn.Game()
    game.headers["Event"] = event
    game.headers["White"] = game.headers["Black"] = "azhpc self-play"
    game.headers["Result"] = {1: "1-0", 0: "1/2-1/2", -1: "0-1"}[record.result]
    game.headers["Termination"] = record.termination
    node = game
    for move in record.moves:
        node = node.add_variation(move)
    out = io.StringIO()
    print(game, file=out, end="\n\n")
    return out.getvalue()


def build_evaluator(cfg: Config, paths: RunPaths, generation: int, device: str) -> tuple[Evaluator, str]:
    """Load the generation's network on ``device``; generation 0 first writes the seeded random net."""

    from .checkpoint import ensure_initial_checkpoint, file_digest, load_model
    from .inference import TorchEvaluator, pick_device

    model_path = paths.model(generation)
    if generation == 0:
        ensure_initial_checkpoint(model_path, cfg.model, cfg.run.seed)
    model, _ = load_model(model_path, expect=cfg.model)
    dev = pick_device(device)
    return TorchEvaluator(model, dev), file_digest(model_path)


def _restore(progress: TaskProgress, paths: RunPaths, generation: int, task: int, done: list[int]) -> None:
    """Counters from the complete shards' sidecars (games of shards lost in flight are not counted)."""
    for shard in done:
        count_shard(progress, read_sidecar(paths.sidecar(generation, task, shard)))
    progress.games_done = progress.games_in_shards


_COUNTERS = ("plies", "white_wins", "draws", "black_wins", "resigned", "playthrough_games", "would_resign", "resign_false_positives")


def _add_stats(progress: TaskProgress, stats: dict) -> None:
    """Add a shard's sidecar stats to the task's progress counters."""
    for key in _COUNTERS:
        setattr(progress, key, getattr(progress, key) + stats[key])
    for key, n in stats["terminations"].items():
        progress.terminations[key] = progress.terminations.get(key, 0) + n


def _shard_stats(records: Sequence[GameRecord]) -> dict:
    terms: dict[str, int] = {}
    for r in records:
        terms[r.termination] = terms.get(r.termination, 0) + 1
    return {
        "plies": sum(r.plies for r in records),
        "white_wins": sum(r.result == 1 for r in records),
        "draws": sum(r.result == 0 for r in records),
        "black_wins": sum(r.result == -1 for r in records),
        "resigned": sum(r.termination == "resignation" for r in records),
        "playthrough_games": sum(r.playthrough for r in records),
        "would_resign": sum(r.would_resign for r in records),
        "resign_false_positives": sum(r.resign_false_positive for r in records),
        "terminations": terms,
    }


def run_selfplay_task(
    run_dir: str | Path,
    generation: int,
    task: int,
    num_tasks: int,
    config_path: str | Path | None = None,
    overrides: Sequence[str] = (),
    device: str = "auto",
    evaluator: Evaluator | None = None,
    deadline: Deadline | None = None,
) -> TaskProgress:
    """Play the task's missing shards of ``generation``; returns the final progress record: status ``done``,
    or ``stopped`` (a stop signal, or ``deadline`` too close for the next shard) with shards still missing."""
    paths = RunPaths(Path(run_dir))
    cfg = resolve_run_config(paths, config_path, overrides)
    plan = plan_task(cfg, task, num_tasks)
    task_dir = paths.task_dir(generation, task)
    task_dir.mkdir(parents=True, exist_ok=True)
    fsutil.remove_stale_temporaries(task_dir)
    done = paths.complete_shards(generation, task)
    missing = [k for k in range(plan.shards) if k not in set(done)]

    progress = TaskProgress(generation=generation, task=task, num_tasks=num_tasks, games_target=plan.games, shards_target=plan.shards)
    previous = read_progress(paths.progress(generation, task))
    if previous:
        progress.attempt = int(previous.get("attempt", 0)) + (0 if previous.get("status") == "done" and not missing else 1)
    pf = ProgressFile(paths.progress(generation, task), progress)
    try:  # a shard of another schema or a broken sidecar stops here, before any work, and says so in progress
        for shard in done:
            read_sidecar(paths.sidecar(generation, task, shard))
    except AzhpcError as exc:
        pf.fail(exc)
        raise
    _restore(progress, paths, generation, task, [k for k in done if k < plan.shards])
    if not missing:
        progress.status = "done"
        pf.write()
        return progress
    pf.write()
    try:
        if evaluator is None:
            evaluator, model_digest = build_evaluator(cfg, paths, generation, device)
        else:
            model_digest = "none (injected evaluator)"
        if deadline is not None and deadline.remaining() < cfg.slurm.stop_margin_s:
            raise AzhpcError(f"the job has {deadline.remaining():.0f} s left, below slurm.stop_margin_s "
                             f"({cfg.slurm.stop_margin_s} s): raise --selfplay-time or lower slurm.stop_margin_s")
        k = search_workers(cfg)
        pacer = _Pacer(deadline, cfg.slurm.stop_margin_s, progress, plan, parallel=max(k, 1))
        progress.status = "running"
        pf.write()
        attrs = {
            "generation": generation, "task": task, "attempt": progress.attempt, "model_sha256": model_digest,
            "config_sha256": cfg.digest(), "history": cfg.model.history, "games_per_shard": plan.games_per_shard,
        }
        if k:
            from .searchpool import SearchPool

            SearchPool(evaluator, cfg, paths, generation, task, attrs, k, num_tasks).run(missing, pacer, pf)
        else:
            warn_pipeline_on_cpu(cfg.selfplay.pipeline, evaluator)
            _play_here(evaluator, cfg, paths, generation, task, plan, attrs, missing, pacer, pf)
        left = plan.shards - len(paths.complete_shards(generation, task))
        progress.status = "stopped" if left else "done"
        progress.error = f"stopped with {left} shard(s) to play ({pacer.reason})" if left else ""
        pf.write()
        return progress
    except SystemExit:  # submitit's requeue on USR2 exits from its signal handler
        progress.status, progress.error = "stopped", "stopped by SLURM's warning signal, requeued"
        pf.write()
        raise
    except BaseException as exc:
        pf.fail(exc)
        raise


def search_workers(cfg: Config) -> int:
    """``selfplay.search_workers``, with -1 (auto) resolved: SLURM's CPUs for the task minus one, else 0."""
    k = cfg.selfplay.search_workers
    if k >= 0:
        return k
    cpus = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return max(0, int(cpus) - 1) if cpus.isdigit() else 0


def _play_here(evaluator: Evaluator, cfg: Config, paths: RunPaths, generation: int, task: int, plan: TaskPlan,
               attrs: dict, missing: list[int], pacer: "_Pacer", pf: ProgressFile) -> None:
    """The single-process engine: this process searches and calls the network."""
    progress = pf.p
    engine = SelfPlayEngine(evaluator, cfg)
    pending: dict[int, list[GameRecord]] = {k: [] for k in missing}
    for record in engine.play(pacer.specs(cfg, generation, task, missing)):
        if Stop.reason:  # a stop signal: in-flight games are dropped (their shard is played again)
            pacer.stopped()
            break
        shard = record.spec.shard
        pending[shard].append(record)
        progress.games_done += 1
        progress.games_this_attempt += 1
        progress.simulations_this_attempt = engine.search.stats.simulations
        if len(pending[shard]) == plan.games_in_shard(shard):
            _write_complete_shard(paths, cfg, generation, task, shard, pending.pop(shard), attrs, progress)
        pf.write()


def _write_complete_shard(paths: RunPaths, cfg: Config, generation: int, task: int, shard: int,
                          records: list[GameRecord], attrs: dict, progress: TaskProgress) -> None:
    count_shard(progress, write_complete_shard(paths, cfg, generation, task, shard, records, attrs))


def count_shard(progress: TaskProgress, sidecar: dict) -> None:
    """Add a complete shard (its sidecar) to the task's progress."""
    progress.shards_done += 1
    progress.games_in_shards += sidecar["games"]
    progress.positions += sidecar["rows"]
    _add_stats(progress, sidecar["stats"])


def write_complete_shard(paths: RunPaths, cfg: Config, generation: int, task: int, shard: int,
                         records: list[GameRecord], attrs: dict) -> dict:
    """Write a shard, its PGN sample and (last: it marks the shard complete) its sidecar; returns the sidecar."""
    arrays = records_to_arrays(records, cfg.selfplay.games_per_shard)
    rows = len(arrays["value_target"])
    size = write_shard(paths.shard(generation, task, shard), arrays, {**attrs, "shard": shard, "games": len(records)},
                       cfg.selfplay.shard_compression)
    sample = sorted(records, key=lambda r: r.spec.index)[: cfg.selfplay.pgn_games_per_shard]
    if sample:
        event = f"azhpc gen {generation} task {task} shard {shard}"
        fsutil.write_text(paths.pgn(generation, task, shard), "".join(game_pgn(r, event) for r in sample), doing="writing PGN")
    sidecar = {
        "schema_version": SHARD_SCHEMA, "generation": generation, "task": task, "shard": shard,
        "games": len(records), "rows": rows, "bytes": size, "bytes_per_position": size / max(rows, 1),
        "policy_entries": int(arrays["policy_count"].astype(np.int64).sum()), "stats": _shard_stats(records),
    }
    fsutil.write_json(paths.sidecar(generation, task, shard), sidecar, doing="writing shard sidecar")
    return sidecar

