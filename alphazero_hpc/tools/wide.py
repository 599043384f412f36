"""``azhpc bench wide``: one generation of a wide self-play array (64, 256, ... tasks) on a SLURM cluster.

It launches the generation (tiny games: the figures are about the pipeline, not chess), asks ``azhpc status`` every
few seconds while the array runs (a fresh process each time, as a user's one-shot call, and an in-process refresh
as ``--watch`` makes), and at the end reads from each task's progress record how long it took from its process's
start to a network ready to search (imports, network load; CPU only, no CUDA context) and to its first finished
game, and from SLURM when each element started. Wall times on an oversubscribed testbed measure the crowd as much as
the code, so every status call also reports its CPU seconds, which do not depend on the load.
"""

from __future__ import annotations

import datetime
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..store import atomic
from ..store.paths import RunPaths
from ..store.progress import read_task_progress

TINY_GAMES = ["selfplay.games_per_shard=1", "selfplay.max_plies=8", "mcts.simulations=8", "mcts.fast_simulations=2",
              "selfplay.games_in_flight=1", "train.replay_ratio=0.5", "train.loader_workers=0", "eval.enabled=false"]


@dataclass
class StatusCall:
    at_s: float  # since the launch
    wall_s: float
    cpu_s: float
    running: int  # tasks running when it was called


@dataclass
class WideReport:
    tasks: int
    launch_s: float = 0.0
    done_s: float = 0.0  # launch -> every task done
    one_shot: list[StatusCall] = field(default_factory=list)
    refresh: list[StatusCall] = field(default_factory=list)
    ready_s: list[float] = field(default_factory=list)  # per task: process start -> search ready
    ready_cpu_s: list[float] = field(default_factory=list)  # ... the CPU seconds that took (no wait for a core in them)
    first_game_s: list[float] = field(default_factory=list)  # per task: process start -> first game
    queue_to_process_s: list[float] = field(default_factory=list)  # per task: SLURM's start -> the process's start
    peak_running: int = 0
    failed: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _azhpc() -> str:
    return shutil.which("azhpc", path=str(Path(sys.executable).parent)) or "azhpc"


def _timed(cmd: Sequence[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (user + system, the child's) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), res


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    v = sorted(values)
    p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
    return f"min {v[0]:.1f}, median {statistics.median(v):.1f}, p90 {p90:.1f}, max {v[-1]:.1f} s"


def run_wide(run_dir: Path, tasks: int, config_path: str | Path | None, overrides: Sequence[str], cpus_per_task: int = 2,
             every_s: float = 5.0, timeout_s: float = 3600.0, echo: Callable[[str], None] = print) -> WideReport:
    """Launch one generation of ``tasks`` self-play tasks on SLURM into ``run_dir``, watch it, read the figures."""
    from ..report import status as status_mod
    from ..report.render import render

    report = WideReport(tasks)
    cmd = [_azhpc(), "launch", "--cluster", "slurm", "--run-dir", str(run_dir), "--generations", "1", "--tasks", str(tasks),
           "--gpus-per-node", "0", "--cpus-per-task", str(cpus_per_task)]
    if config_path:
        cmd += ["--config", str(config_path)]
    for o in [*TINY_GAMES, f"selfplay.games_per_generation={tasks}", *overrides]:
        cmd += ["--set", o]
    t0 = time.perf_counter()
    wall, _, res = _timed(cmd)
    if res.returncode != 0:
        raise RuntimeError(f"the launch failed: {res.stderr.strip()[-500:]}")
    report.launch_s = wall
    echo(f"launched {tasks} tasks in {wall:.1f} s: {(res.stdout.strip().splitlines() or [''])[0]}")
    paths = RunPaths(run_dir)
    model = paths.model(1)
    while time.perf_counter() - t0 < timeout_s:
        wall, cpu, res = _timed([_azhpc(), "status", str(run_dir), "--json"])
        st = json.loads(res.stdout) if res.returncode == 0 else {}
        sp = (st.get("generations") or [{}])[0].get("selfplay") or {}
        running = int(sp.get("running", 0))
        report.peak_running = max(report.peak_running, running)
        at = time.perf_counter() - t0
        report.one_shot.append(StatusCall(at, wall, cpu, running))
        c0, w0 = time.process_time(), time.perf_counter()
        render(status_mod.collect(run_dir))
        report.refresh.append(StatusCall(at, time.perf_counter() - w0, time.process_time() - c0, running))
        echo(f"[{at:6.0f} s] {sp.get('done', 0)}/{tasks} done, {running} running; status one-shot {wall:.2f} s wall "
             f"{cpu:.2f} s CPU, refresh {report.refresh[-1].wall_s:.2f} s wall {report.refresh[-1].cpu_s:.2f} s CPU")
        if int(sp.get("done", 0)) + int(sp.get("failed", 0)) >= tasks and not report.done_s:
            report.done_s = at
        if model.exists() or (st.get("generations") and (st["generations"][0].get("train") or {}).get("state") == "failed"):
            break
        time.sleep(every_s)
    starts, elements = _slurm_starts(paths)
    for t in range(tasks):
        p = read_task_progress(paths.progress(0, t))
        if p is None or p.status != "done":
            report.failed.append(t)
            continue
        report.ready_s.append(p.ready_s)
        report.ready_cpu_s.append(p.ready_cpu_s)
        report.first_game_s.append(p.first_game_s)
        if elements.get(t) in starts and p.process_started:
            report.queue_to_process_s.append(p.process_started - starts[elements[t]])
    atomic.write_json(paths.wide_report, report.to_json(), doing="writing the wide-array figures")
    return report


def _slurm_starts(paths: RunPaths) -> tuple[dict[str, float], dict[int, str]]:
    """SLURM's start time of each array element (``JOB_INDEX``, from sacct; empty without accounting), and the
    element of each task (from the launch record)."""
    from ..launch.record import read_record

    record = read_record(paths)
    jobs = [j for j in record.jobs if j.stage == "selfplay" and j.generation == 0] if record else []
    elements = {t: j.element_id(t) for j in jobs for t in j.task_ids()}
    ids = [j.job_id for j in jobs]
    if not ids:
        return {}, elements
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,Start"], capture_output=True,
                         text=True).stdout
    starts = {}
    for line in out.splitlines():
        job, _, start = line.partition("|")
        try:  # sacct's default: local time, ISO 8601 to the second
            starts[job] = datetime.datetime.fromisoformat(start).timestamp()
        except ValueError:
            continue  # Unknown, None: never started
    return starts, elements


def summary(r: WideReport) -> list[str]:
    def calls(xs: list[StatusCall]) -> str:
        if not xs:
            return "none"
        return (f"wall median {statistics.median(c.wall_s for c in xs):.2f} s, max {max(c.wall_s for c in xs):.2f} s; "
                f"CPU median {statistics.median(c.cpu_s for c in xs):.2f} s, max {max(c.cpu_s for c in xs):.2f} s "
                f"({len(xs)} calls)")

    return [f"{r.tasks} tasks: launch {r.launch_s:.1f} s, every task done after {r.done_s:.0f} s, at most "
            f"{r.peak_running} running at once, {len(r.failed)} not done",
            f"per task, SLURM start -> process start: {_spread(r.queue_to_process_s)}",
            f"per task, process start -> network loaded, search ready: {_spread(r.ready_s)}; its CPU seconds: "
            f"{_spread(r.ready_cpu_s)}",
            f"per task, process start -> first game: {_spread(r.first_game_s)}",
            f"azhpc status, one-shot (a fresh process): {calls(r.one_shot)}",
            f"azhpc status, refresh (--watch's next frame, in process): {calls(r.refresh)}"]
