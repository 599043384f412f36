"""``azhpc bench chaos``: an unattended week, simulated on one machine.

A seeded driver launches a local run and, at random moments, does to it what a week on a shared machine does:
SIGKILL of a self-play task (the process that serves its search workers the network), of one search worker, of
a training rank or of the supervisor; a full disk for a few seconds (a filler file in the run's filesystem, only
where that filesystem has at most ``max_fill_mb`` free: a small scratch or tmpfs mount, never a real disk); a
complete shard of a running task overwritten by hand. Whenever the supervisor is gone before the last network
exists, the driver runs ``azhpc resume``, as a user would. When the run completes it checks what the run
promises: every planned game on disk exactly once in complete shards, no temporaries left, every network
loadable, each generation's games played by that generation's network.

Every fault, resume and check is one JSON line in ``RUN/logs/chaos.jsonl``: the evidence. Given the same
seed the driver makes the same choices (kinds, delays, victims among those present); what they hit depends on
timing, which the log records.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence, get_args

import h5py

from ..cluster import procs
from ..errors import AzhpcError
from ..launch.record import azhpc_process_alive, pid_alive, read_record
from ..launch.resume import resume
from ..launch.start import launch
from ..net.checkpoint import file_digest, load_model
from ..store.paths import RunPaths
from ..store.progress import read_task_progress, read_train_progress
from ..store.runconfig import read_run_config

Fault = Literal["selfplay-task", "search-worker", "trainer", "supervisor", "full-disk", "corrupt-shard"]
FAULTS: tuple[Fault, ...] = get_args(Fault)
# What a run under the driver needs: search workers to kill, and no generation trained on part of its games (a
# failed task stops the generation until resume has played it; with a lower fraction training goes on without it).
CHAOS_OVERRIDES = ("selfplay.search_workers=1", "train.min_selfplay_fraction=1.0", "eval.enabled=false")


@dataclass
class ChaosReport:
    faults: list[dict[str, Any]] = field(default_factory=list)  # the faults that hit something
    resumes: int = 0
    problems: list[str] = field(default_factory=list)  # what the final check found wrong; empty: all kept
    games: int = 0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


class _Log:
    def __init__(self, path: Path, echo: Callable[[str], None]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.echo, self.t0 = path, echo, time.time()

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        line = {"time": round(time.time(), 3), "t": round(time.time() - self.t0, 2), "event": event, **fields}
        with open(self.path, "a") as fh:  # one writer (the driver); a line is complete or absent after a crash
            fh.write(json.dumps(line, sort_keys=True) + "\n")
        self.echo(f"[chaos {line['t']:7.1f}s] {event}: " + ", ".join(f"{k}={v}" for k, v in fields.items()))
        return line


def _current_generation(paths: RunPaths, generations: int) -> int | None:
    return next((g for g in range(generations) if not paths.model(g + 1).exists()), None)


def _reap() -> None:
    """Collect the driver's finished children (the supervisors it started): a killed one would stay a zombie,
    which counts as alive, and the driver would wait for it for ever."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _supervisor(paths: RunPaths) -> int:
    """The live local supervisor's pid, else 0."""
    _reap()
    record = read_record(paths)
    if record is None:
        return 0
    pid = int(record.supervisor.get("pid", 0) or 0)
    alive = record.supervisor.get("state") == "running" and azhpc_process_alive(pid, record.supervisor.get("host", ""))
    return pid if alive else 0


def _wait_started(paths: RunPaths, pid: int, limit_s: float = 120.0) -> None:
    """Until the supervisor that resume started has written itself into the record (or ended): before that the
    record still says ``resuming`` and a second resume would start a second supervisor."""
    deadline = time.time() + limit_s
    while pid and time.time() < deadline:
        _reap()  # one that died at once stays our zombie, alive to pid_alive, until reaped
        if not pid_alive(pid):
            return
        record = read_record(paths)
        if record is not None and int(record.supervisor.get("pid", 0) or 0) == pid:
            return
        time.sleep(0.1)


def _running_tasks(paths: RunPaths, g: int) -> list[Any]:
    out = []
    for path in paths.progress_files(g):
        p = read_task_progress(path)
        if p is not None and p.status == "running" and azhpc_process_alive(p.pid, p.host):
            out.append(p)
    return out


def _targets(paths: RunPaths, g: int, kind: Fault) -> list[Any]:
    """What ``kind`` can hit now: pids to kill, or shards to overwrite ([] when nothing is there)."""
    if kind == "supervisor":
        pid = _supervisor(paths)
        return [pid] if pid else []
    if kind == "selfplay-task":
        return [p.pid for p in _running_tasks(paths, g)]
    if kind == "search-worker":  # spawned by the task: its parent is the task's pid
        return [w for p in _running_tasks(paths, g) for w in p.search_worker_pids if pid_alive(w) and procs.parent(w) == p.pid]
    if kind == "trainer":  # a training rank (the stage process's child, or torchrun's where several ranks train)
        t = read_train_progress(paths.train_progress(g + 1))
        if t is None or t.status != "running" or not azhpc_process_alive(t.pid, t.host):
            return []
        commands = {p: procs.cmdline(p) or b"" for p in procs.descendants(t.pid)}
        return [p for p, c in commands.items() if b"alphazero_hpc.train" in c and b"torch.distributed.run" not in c]
    if kind == "corrupt-shard":  # a complete shard of a task still playing: training has not read it yet
        return [paths.shard(g, p.task, k) for p in _running_tasks(paths, g) for k in paths.complete_shards(g, p.task)]
    return [paths.root] if _supervisor(paths) else []  # full-disk: while the run is running


def _fill(paths: RunPaths, max_fill_mb: int, hold_s: float) -> dict[str, Any]:
    """Fill the run's filesystem for ``hold_s`` seconds, then free it; skipped where more than max_fill_mb is free."""
    st = os.statvfs(paths.root)
    free_mb = st.f_bavail * st.f_frsize / 2**20
    if free_mb > max_fill_mb:
        return {"skipped": f"{free_mb:.0f} MiB free, more than --max-fill-mb {max_fill_mb}: not filling a real disk"}
    filler = paths.chaos_filler
    written = 0
    try:
        with open(filler, "wb") as fh:
            block = b"\0" * 2**20
            while True:
                try:
                    fh.write(block)
                    fh.flush()
                    written += len(block)
                except OSError:
                    break
        time.sleep(hold_s)
    finally:
        filler.unlink(missing_ok=True)
    return {"filled_mb": round(written / 2**20, 1), "held_s": round(hold_s, 1)}


def _inject(paths: RunPaths, g: int, kind: Fault, rng: random.Random, max_fill_mb: int) -> dict[str, Any] | None:
    targets = _targets(paths, g, kind)
    if not targets:
        return None
    if kind == "full-disk":
        return _fill(paths, max_fill_mb, rng.uniform(1.0, 5.0))
    victim = rng.choice(targets)
    if kind == "corrupt-shard":
        data = bytearray(victim.read_bytes())
        cut = rng.randrange(64, max(65, len(data) // 2))
        if rng.random() < 0.5:
            victim.write_bytes(bytes(data[:cut]))  # truncated (a copy or a disk that stopped short)
            how = f"truncated to {cut} of {len(data)} bytes"
        else:
            data[:cut] = rng.randbytes(cut)  # overwritten from its start
            victim.write_bytes(bytes(data))
            how = f"first {cut} bytes overwritten"
        return {"shard": str(victim.relative_to(paths.root)), "how": how}
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return {"pid": victim, "signal": "SIGKILL"}


def check_run(paths: RunPaths, generations: int) -> tuple[int, list[str]]:
    """(games on disk, problems): every planned game once in complete shards, no temporaries, every network
    loadable and each generation's games played by its network."""
    cfg = read_run_config(paths)
    planned = cfg.selfplay.games_per_generation
    problems, total = [], 0
    for g in range(generations):
        seen: set[tuple[int, int]] = set()
        digest = file_digest(paths.model(g)) if paths.model(g).exists() else ""
        for task in paths.tasks(g):
            for k in paths.complete_shards(g, task):
                with h5py.File(paths.shard(g, task, k), "r") as f:
                    ids = {(task, int(i)) for i in set(f["game_id"][:].tolist())}
                    if f.attrs["model_sha256"] != digest:
                        problems.append(f"generation {g} task {task} shard {k} was played by another network")
                if ids & seen:
                    problems.append(f"generation {g} task {task} shard {k} repeats {len(ids & seen)} game(s)")
                seen |= ids
        total += len(seen)
        if len(seen) != planned:
            problems.append(f"generation {g} has {len(seen)} of its {planned} games")
        left = [p.name for p in paths.selfplay(g).glob("task-*/*") if p.name.endswith(".tmp")]
        if left:
            problems.append(f"generation {g} left temporaries: {', '.join(left)}")
    for g in range(generations + 1):
        try:
            load_model(paths.model(g))
        except (AzhpcError, OSError) as exc:
            problems.append(f"network {g} does not load: {exc}")
    return total, problems


def run_chaos(run_dir: Path, config: str | Path, overrides: Sequence[str], generations: int, faults: int, seed: int,
              mean_gap_s: float = 8.0, max_fill_mb: int = 512, patience_s: float = 60.0, timeout_s: float = 3600.0,
              kinds: Sequence[Fault] = FAULTS, echo: Callable[[str], None] = print) -> ChaosReport:
    """Launch (or pick up) a local run of ``generations`` and hit it with ``faults`` faults (each kind once first,
    then kinds at random), one every ``mean_gap_s`` seconds on average, resuming it whenever its supervisor is
    gone; then check it. When a fault is due, the first planned kind with something to hit goes; the first kind of
    the plan is missed when it has had nothing to hit for ``patience_s``."""
    paths = RunPaths(Path(run_dir))
    rng = random.Random(seed)
    log = _Log(paths.chaos_log, echo)
    report = ChaosReport()
    t0 = time.time()
    if not paths.launch_record.exists():
        # every fault may cost a task one attempt without progress (a supervisor killed stops both tasks): the run
        # may fail only for a task that fails on its own, not for having been hit more often than the default allows
        started = launch(paths.root, config, [*overrides, *CHAOS_OVERRIDES, f"run.generations={generations}",
                                              f"slurm.max_attempts={faults + 3}"], cluster="local")
        log.write("launch", generations=generations, seed=seed, faults=faults, overrides=list(overrides))
        _wait_started(paths, started.supervisor_pid)  # not yet in the record: not a supervisor gone, to resume
    order = rng.sample(list(kinds), len(kinds))  # every kind once first (in a seeded order), then any
    order += [rng.choice(list(kinds)) for _ in range(max(0, faults - len(order)))]
    plan = [(kind, rng.expovariate(1.0 / mean_gap_s)) for kind in order[:faults]]
    next_at, waiting_since = time.time() + (plan[0][1] if plan else 0.0), time.time()
    while (g := _current_generation(paths, generations)) is not None:
        if time.time() - t0 > timeout_s:
            raise AzhpcError(f"chaos: the run did not complete in {timeout_s:.0f} s (generation {g}); "
                             f"{paths.chaos_log} and azhpc status {paths.root} say where it stopped")
        if plan and time.time() >= next_at:
            # the first planned kind that has something to hit now: a kind whose target exists only for moments (a
            # complete shard of a task still playing, a training rank) keeps its place while the others go ahead
            i, hit = next(((i, h) for i, (kind, _) in enumerate(plan)
                           if (h := _inject(paths, g, kind, rng, max_fill_mb)) is not None), (0, None))
            if hit is not None or time.time() - waiting_since > patience_s:
                kind = plan.pop(i)[0]
                report.faults.append(log.write(kind if hit is not None else "missed", generation=g,
                                               **(hit if hit is not None else {"kind": kind, "waited_s": patience_s})))
                next_at = time.time() + (plan[0][1] if plan else 0.0)
                if i == 0:
                    waiting_since = time.time()
        if not _supervisor(paths) and _current_generation(paths, generations) is not None:
            time.sleep(0.5)  # a supervisor that just ended writes its record first
            if _supervisor(paths):
                continue
            record = read_record(paths)
            result = resume(paths.root, detach=True, command="azhpc bench chaos")
            report.resumes += 1
            log.write("resume", generation=g, supervisor_was=record.supervisor.get("state") if record else None,
                      error=(record.supervisor.get("error", "") if record else "")[:300], message=result.message,
                      stopped=result.cancelled)
            if result.gave_up:
                raise AzhpcError("chaos: resume gave up: " + "; ".join(result.gave_up))
            _wait_started(paths, result.supervisor_pid)
        time.sleep(0.2)
    while _supervisor(paths):  # the supervisor writes its last record after the last network
        time.sleep(0.2)
    report.games, report.problems = check_run(paths, generations)
    report.faults = [f for f in report.faults if f["event"] != "missed"]
    report.wall_s = time.time() - t0
    log.write("check", games=report.games, problems=report.problems, faults=len(report.faults), resumes=report.resumes,
              wall_s=round(report.wall_s, 1))
    return report
