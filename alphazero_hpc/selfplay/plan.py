"""A self-play task's plan: which games it plays, in which shards, with which seeds, and when to stop
starting shards. Pure: no torch, no HDF5, no chess (``launch.plan`` uses it to check a launch).

Seeds derive from (run seed, generation, task, shard, game), so a rerun of a task plays the same games.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ..cluster.preempt import Deadline, Stop
from ..config import Config
from ..errors import AzhpcError
from ..store.progress import TaskProgress


@dataclass(frozen=True)
class GameSpec:
    """Which game to play: its place in the task's shards and its random seed."""

    shard: int
    index: int  # index within the shard
    seed: int


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


class Pacer:
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
