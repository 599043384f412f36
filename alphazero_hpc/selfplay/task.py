"""A self-play task: the function a SLURM array element (or ``azhpc selfplay``) runs.

It plays its share of a generation's games with the generation's network and leaves them as complete
shards. Started again with the same arguments (a requeue, a retry) it plays only the shards that are
missing; seeds derive from (run seed, generation, task, shard, game), so the rerun writes what the first
attempt would have.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Sequence

from ..cluster import procs
from ..cluster.preempt import Deadline, Stop
from ..config import Config
from ..cluster.slurmenv import SlurmEnv
from ..errors import CheckpointError, ShardError, ShardSchemaError
from ..net.cputhreads import warn_pipeline_on_cpu
from ..search.evaluator import Evaluator
from ..store import atomic
from ..store.paths import RunPaths
from ..store.progress import ProgressFile, TaskProgress, check_stalled, read_task_progress, slice_ended, stalled_slices
from ..store.runconfig import resolve_run_config
from ..store.shards import quarantine, read_sidecar
from .engine import GameRecord, SelfPlayEngine
from .output import write_complete_shard
from .plan import Pacer, TaskPlan, plan_task


def build_evaluator(cfg: Config, paths: RunPaths, generation: int, device: str) -> tuple[Evaluator, str]:
    """Load the generation's network on ``device``; generation 0 first writes the seeded random net."""

    from ..net.checkpoint import ensure_initial_checkpoint, file_digest, load_model
    from ..net.inference import TorchEvaluator, pick_device

    model_path = paths.model(generation)
    if generation == 0:
        ensure_initial_checkpoint(model_path, cfg.model, cfg.run.seed)
    model, _ = load_model(model_path, expect=cfg.model)
    dev = pick_device(device)
    evaluator = TorchEvaluator(model, dev, cfg.mcts.precision, cfg.mcts.channels_last)
    if cfg.mcts.precision == "bf16-if-native":  # which one it became, on this node, in the task's log
        print(f"azhpc: {evaluator.precision}", file=sys.stderr, flush=True)
    return evaluator, file_digest(model_path)


def _complete_shards(paths: RunPaths, generation: int, task: int) -> list[int]:
    """The task's complete shards; one whose sidecar is damaged is set aside (``.bad``) to be played again."""
    done = []
    for shard in paths.complete_shards(generation, task):
        try:
            read_sidecar(paths.sidecar(generation, task, shard))
            done.append(shard)
        except ShardSchemaError:
            raise
        except ShardError as exc:
            quarantine(paths.shard(generation, task, shard))
            print(f"azhpc: {exc}; set aside as .bad, playing shard {shard} again", file=sys.stderr, flush=True)
    return done


def _restore(progress: TaskProgress, paths: RunPaths, generation: int, task: int, done: list[int]) -> None:
    """Counters from the complete shards' sidecars (games of shards lost in flight are not counted)."""
    for shard in done:
        progress.add_shard(read_sidecar(paths.sidecar(generation, task, shard)))
    progress.games_done = progress.games_in_shards


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
    if generation > 0 and evaluator is None and not paths.model(generation).exists():  # before anything is written
        raise CheckpointError(f"checkpoint {paths.model(generation)} not found: train the previous generation first "
                              f"(azhpc train --generation {generation - 1}) or check the run folder and --generation")
    cfg = resolve_run_config(paths, config_path, overrides)
    plan = plan_task(cfg, task, num_tasks)
    task_dir = paths.task_dir(generation, task)
    task_dir.mkdir(parents=True, exist_ok=True)
    atomic.remove_stale_temporaries(task_dir)
    progress = TaskProgress(generation=generation, task=task, num_tasks=num_tasks, games_target=plan.games,
                            shards_target=plan.shards, process_started=procs.started() or 0.0)
    previous = read_task_progress(paths.progress(generation, task))
    if previous is not None:
        missing = set(range(plan.shards)) - set(paths.complete_shards(generation, task))
        progress.attempt = previous.attempt + (0 if previous.status == "done" and not missing else 1)
    pf = ProgressFile(paths.progress(generation, task), progress)
    try:  # a shard of another schema stops here, before any work, and says so in progress
        done = _complete_shards(paths, generation, task)
    except ShardSchemaError as exc:
        pf.fail(exc)
        raise
    todo = [k for k in range(plan.shards) if k not in set(done)]
    _restore(progress, paths, generation, task, [k for k in done if k < plan.shards])
    if not todo:
        progress.status = "done"
        pf.write()
        return progress
    progress.start_mark = len(done)
    if previous is not None and previous.status != "done":  # a slice that ended without a new shard counts
        progress.stalled = stalled_slices(previous.start_mark, previous.stalled, len(done))
    pf.write()
    try:
        check_stalled(f"generation {generation} self-play task {task}", progress.stalled, cfg.slurm.max_attempts,
                      f"{len(done)} of {plan.shards} shards",
                      "a shard must fit in one slice: lower selfplay.games_per_shard, raise slurm.selfplay_time_min or "
                      "lower slurm.stop_margin_s; the job logs say what stopped each slice",
                      slice_ended(previous.status, previous.error) if previous is not None else "")
        if evaluator is None:
            evaluator, model_digest = build_evaluator(cfg, paths, generation, device)
        else:
            model_digest = "none (injected evaluator)"
        describe = getattr(evaluator, "describe", None)
        progress.device = describe() if describe is not None else type(evaluator).__name__
        if deadline is not None and deadline.remaining() < cfg.slurm.stop_margin_s:
            # a slow start (a loaded node, a slow file system): a slice without progress, which the stall rule counts
            progress.status = "stopped"
            progress.error = (f"the job started with {deadline.remaining():.0f} s left, below slurm.stop_margin_s "
                              f"({cfg.slurm.stop_margin_s} s); requeued (raise --selfplay-time or lower "
                              f"slurm.stop_margin_s if every slice starts this late)")
            pf.write()
            return progress
        progress.ready_s = time.time() - progress.process_started if progress.process_started else 0.0
        progress.ready_cpu_s = time.process_time()
        k = search_workers(cfg)
        pacer = Pacer(deadline, cfg.slurm.stop_margin_s, progress, plan, parallel=max(k, 1))
        progress.status = "running"
        pf.write()
        attrs = {
            "generation": generation, "task": task, "attempt": progress.attempt, "model_sha256": model_digest,
            "config_sha256": cfg.digest(), "history": cfg.model.history, "games_per_shard": plan.games_per_shard,
        }
        if cfg.mcts.algorithm == "gumbel":  # absent: visit counts (every shard before Gumbel search)
            attrs["policy_target"] = "gumbel_improved"
        if k:
            from .pool import SearchPool

            SearchPool(evaluator, cfg, paths, generation, task, attrs, k, num_tasks).run(todo, pacer, pf)
        else:
            warn_pipeline_on_cpu(cfg.selfplay.pipeline, evaluator)
            _play_here(evaluator, cfg, paths, generation, task, plan, attrs, todo, pacer, pf)
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
    cpus = SlurmEnv.now().cpus_per_task
    return max(0, cpus - 1) if cpus else 0


def _play_here(evaluator: Evaluator, cfg: Config, paths: RunPaths, generation: int, task: int, plan: TaskPlan,
               attrs: dict, missing: list[int], pacer: "Pacer", pf: ProgressFile) -> None:
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
            progress.add_shard(write_complete_shard(paths, cfg, generation, task, shard, pending.pop(shard), attrs))
        pf.write()
