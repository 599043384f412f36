"""``azhpc status``: what a run is doing, from its folder (progress files, sidecars, metrics, checkpoints)
and, when present, from squeue and sacct. Every task's progress shows while it runs.

A task's state: ``done`` when its progress file says so; else what the scheduler says of its array element
(pending, running, failed with SLURM's state); else the progress file (running, failed with its error);
else pending. A local run reads its stage processes from launch.json instead of a scheduler.

``collect`` returns a ``RunStatus`` (typed records, read by ``report.render``, ``report.follow`` and
``report.plot``); ``RunStatus.to_json()`` is what ``azhpc status --json`` prints.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ..cluster import scheduler
from ..config import Config
from ..errors import AzhpcError
from ..evaluate.elo import format_elo
from ..evaluate.ledger import LedgerEntry, read_ledger, search_tag
from ..launch.plan import LaunchPlan
from ..launch.record import ElsewhereError, JobRecord, LaunchRecord, SupervisorRecord, azhpc_process_alive, job_states, read_record
from ..store.paths import RunPaths
from ..store.progress import TaskProgress, read_eval_progress, read_import_progress, read_task_progress, read_train_progress
from ..store.runconfig import read_run_config
from ..store.shards import SidecarCache, generation_totals


# What azhpc status says of a task, a training or an evaluation: a progress record's Status, or what the launch record
# and the scheduler add where the process has written none:
#   pending    not started yet (queued, or waiting for its dependency)
#   starting, running, stopped, done, failed   as store.progress.Status says
#   cancelled  its job was cancelled before it ran (azhpc cancel, scancel)
StageState = Literal["pending", "starting", "running", "stopped", "done", "failed", "cancelled"]


@dataclass(frozen=True)
class TaskRow:
    """One self-play task of a generation."""

    task: int
    state: StageState  # done, running, pending, stopped or failed
    detail: str  # why it is pending or failed
    attempt: int
    games: int
    games_target: int
    positions: int
    shards: int
    games_per_s: float
    host: str
    search_workers: int
    search_worker_restarts: int
    device: str = ""  # where the task's network runs (its progress record)


@dataclass(frozen=True)
class SelfPlayStatus:
    """A generation's self-play: task states, and totals from complete shards and progress files."""

    done: int
    running: int
    pending: int
    failed: int
    tasks: int
    games: int  # in complete shards
    games_target: int
    positions: int
    shards: int
    games_per_s: float  # summed over running tasks
    avg_game_plies: float
    wdl: list[int]  # white wins, draws, black wins
    resign_false_positives: int
    playthrough_games: int
    search_worker_restarts: int
    task_rows: list[TaskRow]


@dataclass(frozen=True)
class TrainStatus:
    """The training job that writes the next generation's network."""

    state: StageState
    step: int
    steps: int
    policy_loss: float | None
    value_loss: float | None
    world_size: int
    checkpoint: str  # the network it wrote, once written
    attempt: int
    error: str


@dataclass(frozen=True)
class EvalStatus:
    """The evaluation of the network a generation's training wrote."""

    network: int
    state: StageState
    matches: list[str]  # one line per match in the ledger
    error: str


@dataclass(frozen=True)
class JobRow:
    """A job (SLURM) or stage process (local) of a generation."""

    stage: str
    job_id: str
    tasks: list[int]
    attempt: int
    dependency: str
    state: str  # SLURM's state(s) of the job's elements, or the local process's
    reason: str = ""  # SLURM only: squeue's reason
    exit_code: int | None = None  # local only
    local: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {"stage": self.stage, "job_id": self.job_id, "tasks": self.tasks, "attempt": self.attempt,
               "dependency": self.dependency, "state": self.state}
        out.update({"exit_code": self.exit_code} if self.local else {"reason": self.reason})
        return out


@dataclass(frozen=True)
class GenerationStatus:
    generation: int
    selfplay: SelfPlayStatus
    train: TrainStatus
    eval: EvalStatus | None
    jobs: list[JobRow]

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "selfplay": asdict(self.selfplay), "train": asdict(self.train),
                "eval": asdict(self.eval) if self.eval is not None else None, "jobs": [j.to_json() for j in self.jobs]}


@dataclass(frozen=True)
class ImportStatus:
    """``azhpc import-pgn``'s tasks: totals of their progress files (complete shards' counts)."""

    tasks: int
    done: int
    failed: list[str]  # one line per failed or stopped task
    games: int
    positions: int
    shards: int
    games_read: int  # games of the input read so far (the furthest task)
    rejected: dict[str, int]
    malformed: int
    malformed_games: list[int]  # the first few, numbered from 1 in the input
    positions_per_s: float  # summed over running tasks


@dataclass(frozen=True)
class RunStatus:
    run: str
    time: float
    plan: LaunchPlan
    config_sha256: str
    generations: list[GenerationStatus]
    supervisor: SupervisorRecord | None = None  # local runs: the launch record's supervisor entry
    scheduler_error: str = ""  # SLURM runs: why the jobs' states are unknown (squeue did not answer)
    imported: ImportStatus | None = None  # the run's PGN import, if it has one
    pretrain: TrainStatus | None = None  # training generation 0 on the imported games (launch --pretrain)
    chain: str = ""  # SLURM runs under a submit limit: which generations are not submitted yet, and the last extension

    def to_json(self) -> dict[str, Any]:
        out = {"run": self.run, "time": self.time, "plan": self.plan.to_json(), "config_sha256": self.config_sha256,
               "generations": [g.to_json() for g in self.generations]}
        if self.imported is not None:
            out["import"] = asdict(self.imported)
        if self.pretrain is not None:
            out["pretrain"] = asdict(self.pretrain)
        if self.supervisor is not None:
            out["supervisor"] = self.supervisor
        if self.scheduler_error:
            out["scheduler_error"] = self.scheduler_error
        if self.chain:
            out["chain"] = self.chain
        return out


def _alive(pid: int, host: str) -> bool | None:
    """Whether a local run's process is alive; None when it runs on another machine (status believes the record)."""
    try:
        return azhpc_process_alive(pid, host)
    except ElsewhereError:
        return None


_SIDECARS = SidecarCache()  # one per process: a watching status re-reads only new sidecars
# ... and nothing of a settled generation (its network written, every task done, none of its jobs live): its self-play
# and training figures no longer change, so a refresh of a long run reads the generations in flight, not all of them
_SETTLED: dict[tuple[str, int], tuple[tuple[int, int], SelfPlayStatus, TrainStatus]] = {}


def _identity(path: Path) -> tuple[int, int] | None:
    """(inode, mtime) of a file; None when it is missing."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _metrics(paths: RunPaths, generation: int, tail: int = 16384) -> dict[str, Any]:
    """The last complete line of the training job's metrics (the job writing ``generation + 1``). Only the file's
    last ``tail`` bytes are read: it grows by a line per step, and status reads it at every refresh."""
    path = paths.train_metrics(generation + 1)
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - tail))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written, or the cut first line of the tail
        if isinstance(row, dict):
            return row
    return {}


def _task_state(t: int, progress: TaskProgress | None, record: LaunchRecord | None, states: dict,
                generation: int) -> tuple[StageState, str]:
    """(state, detail) of one self-play task."""
    if progress is not None and progress.status == "done":
        return "done", ""
    sched = None
    if record is not None:
        jobs = [j for j in record.jobs_of(generation, "selfplay") if t in j.task_ids()]
        if jobs:
            job = jobs[-1]
            if record.plan.cluster == "local":
                if job.state == "running" and _alive(job.local_pid, job.host) is not False:  # None: another machine's
                    return "running", ""
                if job.state == "failed" or job.state == "running":
                    return "failed", (progress.error if progress else "") or f"process exited with status {job.exit_code}"
                return ("done", "") if job.state == "done" else ("pending", "")
            sched = scheduler.element_state(states, job.job_id, job.element(t), job.size)
    if sched is not None:
        if sched.state == "PENDING" or sched.state.startswith("REQUEUE"):
            return "pending", sched.reason
        if sched.active:
            return "running", ""
        if sched.failed:
            if progress is None:
                return "failed", f"{sched.state} before it started"
            return "failed", f"{sched.state} ({sched.reason})" + (f": {progress.error}" if progress.error else "")
        if progress is None:
            return "failed", f"{sched.state} without writing progress"
    if progress is None:
        return "pending", ""
    if progress.status == "failed":
        return "failed", progress.error
    if progress.status == "stopped":  # and no job of it is coming: resume continues it
        return "failed", f"{progress.error or 'stopped'}; azhpc resume continues it"
    return "running", ""


def collect(run_dir: Path) -> RunStatus:
    paths = RunPaths(Path(run_dir))
    cfg = read_run_config(paths)
    record = read_record(paths)
    if record is not None:
        plan = record.plan
    else:  # a run made by hand with azhpc selfplay/train
        gens = paths.generations()
        found = [read_task_progress(p) for g in gens for p in paths.progress_files(g)]
        tasks = max([p.num_tasks for p in found if p] or [1])
        plan = LaunchPlan("manual", max(gens, default=-1) + 1, tasks, 1, 0, 1)
    states, silent = {}, ""
    if record and plan.cluster == "slurm":
        try:
            states = job_states(paths, record)
        except scheduler.SchedulerSilent as exc:
            silent = str(exc)
    supervisor = None
    if record is not None and record.supervisor:
        supervisor = SupervisorRecord(**record.supervisor)
        if supervisor.get("state") == "running" and _alive(int(supervisor.get("pid", 0) or 0), supervisor.get("host", "")) is False:
            supervisor["state"] = "lost"
            supervisor["error"] = "the local supervisor is gone (killed?); its stage processes may have been stopped with it"
    ledger = _ledger(paths)
    by_generation: dict[int, list[JobRecord]] = {}  # grouped once: a long run has thousands of jobs
    for job in record.jobs if record is not None else []:
        by_generation.setdefault(job.generation, []).append(job)
    evaluated = paths.evaluated()
    generations = [_generation(paths, cfg, plan, [_job_row(j, plan, states) for j in by_generation.get(g, [])], states,
                               record, g, ledger, evaluated) for g in range(plan.generations)]
    pretrain = None
    if plan.pretrain:
        jobs = [_job_row(j, plan, states) for j in by_generation.get(-1, [])]
        pretrain = _train(paths, plan, -1, jobs)
    return RunStatus(str(paths.root), time.time(), plan, cfg.digest(), generations, supervisor, silent,
                     _imported(paths), pretrain, _chain(record))


def _imported(paths: RunPaths) -> ImportStatus | None:
    files = paths.import_progress_files()
    if not files:
        return None
    found = [p for p in (read_import_progress(f) for f in files) if p is not None]
    tasks = max([p.num_tasks for p in found] or [len(files)])
    rejected: dict[str, int] = {}
    for p in found:
        for why, n in p.rejected.items():
            rejected[why] = rejected.get(why, 0) + n
    return ImportStatus(
        tasks=tasks, done=sum(p.status == "done" for p in found),
        failed=[f"task {p.task} {p.status}: {p.error}" for p in found if p.status in ("failed", "stopped")],
        games=sum(p.games for p in found), positions=sum(p.positions for p in found),
        shards=sum(p.shards_done for p in found), games_read=max([p.next_game for p in found] or [0]), rejected=rejected,
        malformed=sum(p.malformed for p in found), malformed_games=sorted(n for p in found for n in p.malformed_games)[:10],
        positions_per_s=sum(p.positions_per_s for p in found if p.status == "running"))


def _ledger(paths: RunPaths) -> tuple[dict[str, list[LedgerEntry]], str]:
    """The evaluation ledger's entries by player (read once per status), or the line saying why it cannot be read."""
    try:
        entries = read_ledger(paths)
    except AzhpcError as exc:
        return {}, str(exc)
    by_player: dict[str, list[LedgerEntry]] = {}
    for e in entries:
        by_player.setdefault(e["player"], []).append(e)
    return by_player, ""


def _selfplay(paths: RunPaths, cfg: Config, plan: LaunchPlan, record: LaunchRecord | None, states: dict,
              g: int) -> SelfPlayStatus:
    rows: list[TaskRow] = []
    counts = {"done": 0, "running": 0, "pending": 0, "failed": 0}
    games_done = plies = in_shards = playthrough = false_positives = 0
    wdl = [0, 0, 0]
    rate = 0.0
    for t in range(plan.tasks):
        p = read_task_progress(paths.progress(g, t))
        state, detail = _task_state(t, p, record, states, g)
        counts[state] += 1
        if p is None:
            rows.append(TaskRow(t, state, detail, 0, 0, 0, 0, 0, 0.0, "", 0, 0))
            continue
        rows.append(TaskRow(t, state, detail, p.attempt, p.games_done, p.games_target, p.positions, p.shards_done,
                            p.games_per_s, p.host, p.search_workers, p.search_worker_restarts, p.device))
        games_done += p.games_done
        plies += p.plies
        in_shards += p.games_in_shards
        wdl = [wdl[0] + p.white_wins, wdl[1] + p.draws, wdl[2] + p.black_wins]
        playthrough += p.playthrough_games
        false_positives += p.resign_false_positives
        if state == "running":
            rate += p.games_per_s
    games, positions, shards = generation_totals(paths, g, _SIDECARS)
    return SelfPlayStatus(**counts, tasks=plan.tasks, games=games, games_target=cfg.selfplay.games_per_generation,
                          positions=positions, shards=shards, games_per_s=rate,
                          avg_game_plies=plies / in_shards if in_shards else 0.0, wdl=wdl,
                          resign_false_positives=false_positives, playthrough_games=playthrough,
                          search_worker_restarts=sum(r.search_worker_restarts for r in rows), task_rows=rows)


def _job_row(job: JobRecord, plan: LaunchPlan, states: dict[str, scheduler.JobState]) -> JobRow:
    base = JobRow(stage=job.stage, job_id=job.job_id, tasks=job.tasks, attempt=job.attempt, dependency=job.dependency,
                  state=job.state)
    if plan.cluster != "slurm":
        return replace(base, exit_code=job.exit_code, local=True)
    keys = [f"{job.job_id}_{i}" for i in range(job.size)] if job.stage == "selfplay" else []
    found = [states[k] for k in keys if states.get(k)] or [states[k] for k in [job.job_id] if states.get(k)]
    return replace(base, state="/".join(sorted({e.state for e in found})) or "UNKNOWN (not in squeue/sacct)",
                   reason=",".join(sorted({e.reason for e in found if e.source == "squeue" and e.reason})))


def _generation(paths: RunPaths, cfg: Config, plan: LaunchPlan, jobs: list[JobRow], states: dict,
                record: LaunchRecord | None, g: int, ledger: tuple[dict[str, list[LedgerEntry]], str], evaluated: set[str]) -> GenerationStatus:
    key = (str(paths.root), g)
    network = _identity(paths.model(g + 1))  # one stat: a folder made again at the same path is not the same run
    settled = _SETTLED.get(key)
    if settled is not None and settled[0] == network:
        sp, train = settled[1], settled[2]
    else:
        sp = _selfplay(paths, cfg, plan, record, states, g)
        train = _train(paths, plan, g, jobs)
        if network is not None and train.state == "done" and sp.done == sp.tasks and not _active(jobs):
            _SETTLED[key] = (network, sp, train)
    return GenerationStatus(g, sp, train, _eval(paths, cfg, g + 1, jobs, ledger, evaluated), jobs)


def _train(paths: RunPaths, plan: LaunchPlan, g: int, jobs: list[JobRow]) -> TrainStatus:
    """The training job that writes network g + 1 (g = -1: pretraining)."""
    m = _metrics(paths, g)
    tp = read_train_progress(paths.train_progress(g + 1))
    ckpt = paths.model(g + 1)
    state: StageState = "done" if ckpt.exists() else (tp.status if tp else "pending")
    error = tp.error if tp else ""
    tj = [r for r in jobs if r.stage == "train"]
    if plan.cluster == "slurm" and tj and state in ("pending", "starting", "running"):
        # what SLURM says overrides a progress file that a killed job (SIGKILL, OOM, a lost node) left "running"
        js = tj[-1].state.split("/")[0]
        if js == "CANCELLED" and state == "pending":
            state = "cancelled"
            error = f"job {tj[-1].job_id} cancelled (by scancel, or because a stage it depends on failed)"
        elif js in scheduler.FAILED:
            state = "failed"
            error = error or f"job {tj[-1].job_id} {tj[-1].state}"
    train = TrainStatus(state=state, step=m.get("step", 0), steps=m.get("steps", 0), policy_loss=m.get("policy_loss"),
                        value_loss=m.get("value_loss"), world_size=m.get("world_size", 0),
                        checkpoint=str(ckpt) if ckpt.exists() else "", attempt=tp.attempt if tp else 0, error=error)
    return train


def _eval(paths: RunPaths, cfg: Config, network: int, jobs: list[JobRow], ledger: tuple[dict[str, list[LedgerEntry]], str],
          evaluated: set[str] | None = None) -> EvalStatus | None:
    """Evaluation of the network generation ``network`` (what this generation's training wrote): the stage's
    progress, its job, and every ledger match that network played. None when it was never evaluated."""
    by_player, ledger_error = ledger
    entries = by_player.get(f"gen:{network}", [])
    folder = paths.eval_progress(network).parent.name
    progress = read_eval_progress(paths.eval_progress(network)) if evaluated is None or folder in evaluated else None
    job = next((j for j in reversed(jobs) if j.stage == "eval"), None)
    if not entries and progress is None and job is None:
        return None
    state = progress.status if progress else ("pending" if job is not None else "done")
    if job is not None and state in ("pending", "running"):
        js = job.state.split("/")[0]
        if js.split(" ")[0] in scheduler.FAILED or js == "failed":  # SLURM's failed states, or a local failure
            state = "failed"
    tags = [search_tag(e, cfg) for e in entries]
    matches = [f"{'@' + tag + ' ' if tag else ''}vs {e['opponent']} +{e['wins']}={e['draws']}-{e['losses']} Elo {format_elo(e['elo'], e['score'])} "
               f"[{format_elo(e['elo_low'], 0.0)}, {format_elo(e['elo_high'], 1.0)}]" for e, tag in zip(entries, tags)]
    return EvalStatus(network, state, matches, "; ".join(progress.errors if progress else []) or ledger_error)


def _chain(record: LaunchRecord | None) -> str:
    """A SLURM chain not yet submitted whole (launch/window.py): what is still to come, and the last word on it."""
    if record is None or record.plan.cluster != "slurm":
        return ""
    last = max((j.generation for j in record.jobs if j.stage == "train"), default=-1)
    news = [e for e in record.events if e.get("event") in ("launch", "extend", "extend failed")]
    if last >= record.plan.generations - 1:
        return ""
    said = news[-1] if news else {}
    word = f"extension failed: {said.get('error', '')}; azhpc resume submits them" if said.get("event") == "extend failed" \
        else f"each training job submits what fits; last {said.get('event', 'launch')}: {said.get('window', '')}"
    return f"generations {last + 1}-{record.plan.generations - 1} not submitted yet ({word})"


def _active(jobs: list[JobRow]) -> bool:
    return any(name in scheduler.ACTIVE for j in jobs for name in j.state.split("/"))


EXIT_GRACE_S = 120.0  # how long a training job may still run after its network is on disk before that is news


def _exiting(gen: GenerationStatus) -> bool:
    """The training job that wrote the run's last network is still running, as it does for a moment after rank 0
    writes it (the ranks and torchrun exit, SLURM ends the step): a ``--wait`` that ended on the network alone printed
    that job RUNNING beside a finished run. Only for ``EXIT_GRACE_S``: a job still running after that (a rank hung in
    its teardown) is shown as it is, and waiting for its time limit would tell nobody more. A job pending or held
    after the network (a stale one of a resume, a requeue at teardown) changes nothing: its stage finds the network."""
    train = [j for j in gen.jobs if j.stage == "train"][-1:]
    if not train or not any(s in ("RUNNING", "COMPLETING", "CONFIGURING") for s in train[0].state.split("/")):
        return False
    try:
        return time.time() - Path(gen.train.checkpoint).stat().st_mtime < EXIT_GRACE_S
    except OSError:
        return False


def finished(status: RunStatus) -> tuple[bool, bool]:
    """(over, succeeded): over when nothing can still change; succeeded when the last checkpoint exists. Never
    over while the scheduler does not answer: its jobs may well be running."""
    gens = status.generations
    if status.scheduler_error:
        return False, False
    sup = status.supervisor
    if gens and gens[-1].train.checkpoint:
        if sup is not None:  # a local run: the supervisor ends after the last evaluation
            return sup.get("state") in ("done", "failed", "cancelled", "lost"), True
        evals = [j for g in gens for j in g.jobs if j.stage == "eval"]
        return not (_active(evals) or _exiting(gens[-1])), True
    if sup is not None:  # a local run
        return sup.get("state") in ("done", "failed", "cancelled", "lost"), False
    if status.plan.cluster == "manual":  # no jobs to ask about: over when nothing runs
        return not any(g.selfplay.running or g.train.state == "running" for g in gens), False
    if status.pretrain is not None and status.pretrain.state in ("failed", "cancelled"):
        return not _active([j for gen in gens for j in gen.jobs]), False
    for gen in gens:
        if gen.train.state in ("failed", "cancelled"):
            return not _active([j for g2 in gens[gen.generation + 1:] for j in g2.jobs]), False
    return not _active([j for gen in gens for j in gen.jobs]), False
