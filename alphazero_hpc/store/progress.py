"""Live progress of a self-play task: a small JSON file rewritten atomically after every game.

A watcher (``azhpc status``) sees every task move while it runs, and sees which task died and why:
a crash writes status ``failed`` with the error line and traceback before the process exits.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from ..errors import AzhpcError, failure_line
from ..cluster.slurmenv import SlurmEnv
from . import atomic
from .shards import Sidecar

PROGRESS_SCHEMA = 1

# What a stage's progress record says it is doing, for every kind of record (an evaluation is never "stopped"):
#   starting  the process has begun, before its first unit of work
#   running   working
#   stopped   stopped in time (a stop signal or the time limit), its work so far kept; run again, it continues
#   done      finished
#   failed    ended by an error; ``error`` says which
Status = Literal["starting", "running", "stopped", "done", "failed"]
# How a stage's process ended, the subset of Status that an ended process can have:
Ended = Literal["stopped", "done", "failed"]
STATUSES: tuple[Status, ...] = get_args(Status)


_R = TypeVar("_R", bound="_JsonRecord")


class _JsonRecord:
    """A progress record as the JSON object of its file, and back (fields this version does not know are ignored)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass; this base is not

    @classmethod
    def from_json(cls: type[_R], data: dict[str, Any]) -> _R:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]  # as in to_json: subclasses are dataclasses
        return cls(**{k: v for k, v in data.items() if k in known})


def stalled_slices(previous_mark: int, previous_stalled: int, mark: int) -> int:
    """How many slices (job attempts) in a row ended without progress, the one before this included: the progress
    measure (``mark``: complete shards, the saved training step) at this attempt's start against the previous
    attempt's start. ``previous_mark`` < 0: no previous attempt, or a finished one."""
    if previous_mark < 0 or mark > previous_mark:
        return 0
    return previous_stalled + 1


def check_stalled(what: str, stalled: int, max_attempts: int, where: str, fix: str, last: str = "") -> None:
    """One line, and no further attempt, once ``max_attempts`` slices in a row made no progress (issue: a stage
    that progresses in every slice is requeued as often as it needs; one that does not must not loop forever).
    ``last``: why the slice before this one stopped, as it recorded it (a start-up that ate the window before the
    stop margin and a shard too long for a slice need different fixes)."""
    if stalled >= max_attempts:
        why = f" (the last slice: {last.removeprefix('stopped: ')})" if last else ""
        raise AzhpcError(f"{what} made no progress in {stalled} slices in a row (slurm.max_attempts={max_attempts}): "
                         f"still at {where}{why}; {fix}")


KILLED = "it recorded no end: killed (a time limit, a preemption or a node failure; the job log says which)"


def slice_ended(status: str, error: str) -> str:
    """How a stage's previous slice ended, from the progress it left: why it stopped or failed, that it was killed
    before it could say (still ``starting`` or ``running``), or '' when it finished."""
    if status in ("stopped", "failed"):
        return error
    return KILLED if status in ("starting", "running") else ""


def start_train_slice(path: Path, step: int) -> tuple[int, str]:
    """Record a training attempt starting at saved step ``step`` in ``path`` (``train/gen-N/slices.json``: the stall
    rule's mark and count, and one entry per slice: where it started and ended, and why it ended) and return how many
    attempts in a row before it made no progress, and how the one before it ended ('' if unknown)."""
    previous = _read_object(path) or {}
    stalled = stalled_slices(int(previous.get("start_step", -1)), int(previous.get("stalled", 0)), step)
    history = previous.get("slices", [])
    history = [h for h in history if isinstance(h, dict)][-999:] if isinstance(history, list) else []  # bounded: a stage that needs more is told by max_attempts
    last = str(history[-1].get("ended", KILLED)) if history else ""
    env = SlurmEnv.now()
    history.append({"start_step": step, "started": round(time.time(), 3), "job": env.job_id,
                    "restart_count": env.restart_count, "host": socket.gethostname()})
    atomic.write_json(path, {"start_step": step, "stalled": stalled, "slices": history}, doing="writing the training slices")
    return stalled, last


def end_train_slice(path: Path, step: int, ended: str) -> None:
    """Close the last entry of ``path``'s slices: the step reached and how it ended (done, or why it stopped). A
    record of what happened, never a reason to fail: a stage whose state or network is saved goes on without it."""
    record = _read_object(path)
    slices = record.get("slices") if record else None
    if not isinstance(slices, list) or not slices or not isinstance(slices[-1], dict):
        return  # nothing to close (a state from before slices were recorded)
    slices[-1].update(end_step=step, ended=ended, ended_at=round(time.time(), 3))
    try:
        atomic.write_json(path, record, doing="writing the training slices")
    except (OSError, AzhpcError) as exc:
        print(f"azhpc train: could not record the slice's end in {path} ({failure_line(exc)})", file=sys.stderr, flush=True)


def read_train_slices(path: Path) -> list[dict]:
    """The slices recorded in ``path`` (empty when none)."""
    data = _read_object(path)
    slices = data.get("slices") if data else None
    return [s for s in slices if isinstance(s, dict)] if isinstance(slices, list) else []


def _read(cls: type[_R], path: Path) -> _R | None:
    """The record of ``cls`` in ``path``; None when the file is missing, unreadable or not such a record."""
    data = _read_object(path)
    try:
        return cls.from_json(data) if data is not None else None
    except TypeError:  # a field missing: not a record of this kind
        return None


@dataclass
class TaskProgress(_JsonRecord):
    generation: int
    task: int
    num_tasks: int
    games_target: int
    shards_target: int
    schema_version: int = PROGRESS_SCHEMA
    status: Status = "starting"
    attempt: int = 1
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    slurm_job_id: str = field(default_factory=lambda: SlurmEnv.now().record_id)
    node: str = field(default_factory=lambda: SlurmEnv.now().node_name)
    cuda_visible_devices: str = field(default_factory=lambda: os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    elapsed_s: float = 0.0  # this attempt
    games_done: int = 0  # all attempts, including games not yet in a shard
    games_in_shards: int = 0
    positions: int = 0  # rows in complete shards
    plies: int = 0
    shards_done: int = 0
    games_this_attempt: int = 0
    simulations_this_attempt: int = 0
    games_per_s: float = 0.0
    start_mark: int = -1  # complete shards when this attempt started (-1: not yet known)
    stalled: int = 0  # attempts in a row before this one that ended without a new complete shard
    simulations_per_s: float = 0.0
    white_wins: int = 0
    draws: int = 0
    black_wins: int = 0
    resigned: int = 0
    playthrough_games: int = 0
    would_resign: int = 0
    resign_false_positives: int = 0
    terminations: dict[str, int] = field(default_factory=dict)
    process_started: float = 0.0  # when this attempt's process started (Unix time; before its imports)
    ready_s: float = 0.0  # process start -> network loaded and search ready (imports, network load), this attempt
    ready_cpu_s: float = 0.0  # ... this process's CPU seconds by then (what start-up costs, whatever the wait for a core)
    first_game_s: float = 0.0  # process start -> this attempt's first finished game
    search_workers: int = 0  # search processes sharing this task's network (0: the task searches itself)
    device: str = ""  # where this attempt's network runs, e.g. "cuda:0 (NVIDIA H100 80GB HBM3)" or "cpu"
    search_worker_pids: list[int] = field(default_factory=list)
    search_worker_restarts: int = 0
    error: str = ""
    traceback: str = ""


    def add_shard(self, sidecar: Sidecar) -> None:
        """Count a complete shard (its sidecar) into the task's totals."""
        self.shards_done += 1
        self.games_in_shards += sidecar.games
        self.positions += sidecar.rows
        stats = sidecar.stats
        for key in ("plies", "white_wins", "draws", "black_wins", "resigned", "playthrough_games", "would_resign",
                    "resign_false_positives"):
            setattr(self, key, getattr(self, key) + getattr(stats, key))
        for key, n in stats.terminations.items():
            self.terminations[key] = self.terminations.get(key, 0) + n


class ProgressFile:
    def __init__(self, path: Path, progress: TaskProgress) -> None:
        self.path = path
        self.p = progress
        self._t0 = time.time()

    def write(self) -> None:
        p = self.p
        p.updated = time.time()
        p.elapsed_s = p.updated - self._t0
        if p.games_this_attempt and not p.first_game_s and p.process_started:
            p.first_game_s = p.updated - p.process_started
        if p.elapsed_s > 0:
            p.games_per_s = p.games_this_attempt / p.elapsed_s
            p.simulations_per_s = p.simulations_this_attempt / p.elapsed_s
        atomic.write_json(self.path, p.to_json(), doing="writing progress")

    def fail(self, exc: BaseException) -> None:
        """Record why the task died; never raises (the original error matters more)."""
        self.p.status = "failed"
        self.p.error = failure_line(exc)
        self.p.traceback = "".join(traceback.format_exception(exc))[-8000:]
        try:
            self.write()
        except Exception:  # noqa: BLE001 - a full disk must not hide the first error
            pass


def _read_object(path: Path) -> dict[str, Any] | None:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_progress(path: Path) -> dict[str, Any] | None:
    """Any progress file as a JSON object; None when it is missing or not (yet) one."""
    return _read_object(path)


def read_task_progress(path: Path) -> TaskProgress | None:
    """A self-play task's progress read back; None when it is missing or unreadable."""
    return _read(TaskProgress, path)


def task_done(progress_path: Path) -> bool:
    """Whether the task of this progress file finished all its shards."""
    p = read_task_progress(progress_path)
    return p is not None and p.status == "done"


@dataclass
class TrainProgress(_JsonRecord):
    """``train/gen-N/progress.json``: the training job writing network N, written by its first node."""

    generation: int
    trained_from: int
    status: Status = "starting"
    attempt: int = 1
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    slurm_job_id: str = field(default_factory=lambda: SlurmEnv.now().job_id)
    restart_count: int = field(default_factory=lambda: SlurmEnv.now().restart_count)
    nodes: int = 1
    ranks: int = 1
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    error: str = ""



def read_train_progress(path: Path) -> TrainProgress | None:
    return _read(TrainProgress, path)


@dataclass
class TrainOutcome(_JsonRecord):
    """How one training rank ended (``train/gen-N/outcomes/node-K/local-L.json``): the trainer writes it as its
    last act and its node's stage reads it after torchrun returns (each node reads its own ranks')."""

    status: Ended  # done (network written, or written before), stopped (state saved, run again) or failed
    rank: int = 0
    step: int = 0  # steps trained, all attempts
    steps: int = 0  # steps planned
    message: str = ""  # stopped: why and where the state is; failed: the error line; done: what was done

    def write(self, folder: Path, local_rank: int) -> None:
        atomic.write_json(folder / f"local-{local_rank}.json", self.to_json(), doing="writing the training outcome")


def _train_outcome_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("local-*.json"))


def read_train_outcomes(folder: Path) -> list[TrainOutcome]:
    """The outcomes of a node's ranks that wrote one (a rank killed before its end wrote none)."""
    found = (_read(TrainOutcome, p) for p in _train_outcome_files(folder))
    return [o for o in found if o is not None]


def clear_train_outcomes(folder: Path) -> None:
    """Remove an earlier attempt's outcomes, before a node's ranks write this attempt's."""
    for stale in _train_outcome_files(folder):
        stale.unlink(missing_ok=True)


@dataclass
class ImportProgress(_JsonRecord):
    """``import/progress/task-T.json``: an import task's counts (all attempts: restored from its sidecars)."""

    task: int
    num_tasks: int
    status: Status = "starting"
    attempt: int = 1
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    slurm_job_id: str = field(default_factory=lambda: SlurmEnv.now().record_id)
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    elapsed_s: float = 0.0  # this attempt
    next_game: int = 0  # games of the input read so far (every task's), i.e. the number of the next one
    games: int = 0  # games of this task in complete shards
    positions: int = 0
    shards_done: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # games left out by a filter, per reason
    malformed: int = 0  # games skipped because they could not be parsed (illegal move, bad FEN, ...)
    malformed_games: list[int] = field(default_factory=list)  # the first few of them, numbered from 1 in the input
    malformed_errors: list[str] = field(default_factory=list)  # ... and why
    positions_per_s: float = 0.0  # this attempt
    error: str = ""
    start_mark: int = -1  # complete shards when this attempt started
    stalled: int = 0  # attempts in a row before this one that ended without a new complete shard

    def write(self, path: Path) -> None:
        self.updated = time.time()
        atomic.write_json(path, self.to_json(), doing="writing import progress")


def read_import_progress(path: Path) -> ImportProgress | None:
    return _read(ImportProgress, path)


@dataclass
class EvalProgress(_JsonRecord):
    """``eval/gen-N/progress.json``: the evaluation stage of network N, one result line per opponent played."""

    generation: int
    opponents: list[str]
    status: Status = "running"
    results: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    slurm_job_id: str | None = field(default_factory=lambda: SlurmEnv.now().job_id or None)
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)



def read_eval_progress(path: Path) -> EvalProgress | None:
    return _read(EvalProgress, path)
