"""``azhpc import-pgn``: PGN files into shards of a run folder, here or as a SLURM array.

One task runs in this process. With ``--tasks T`` the import is split (task I takes every T-th game): on SLURM
one array of T elements through submitit, as self-play's (each element requeues itself before its time limit);
locally T processes, as many at once as this machine has cores. Whatever runs it, the files and filters are fixed
by ``RUN/import/import.json`` first, so every task and every rerun reads the same games.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..errors import AzhpcError
from ..pgn.task import ImportSpec, fix_spec, import_state, run_import_task
from ..store import atomic
from ..store.paths import RunPaths, check_run_root
from ..store.progress import ImportProgress, read_import_progress
from ..store.runconfig import resolve_run_config
from . import plan as planning


@dataclass
class ImportResult:
    paths: RunPaths
    spec: ImportSpec
    progress: list[ImportProgress] = field(default_factory=list)  # tasks run here
    jobs: list[str] = field(default_factory=list)  # SLURM arrays submitted
    failed: list[str] = field(default_factory=list)  # local task processes that failed: one line each


def import_pgn(run_dir: Path, spec: ImportSpec, task: int | None = None, cluster: str | None = None,
               config_path: str | Path | None = None, overrides: Sequence[str] = ()) -> ImportResult:
    """Import ``spec``'s games into ``run_dir`` (made, with its config, when new): task ``task`` here, or all of
    them (one here, several as local processes or as a SLURM array)."""
    paths = RunPaths(check_run_root(Path(run_dir)))
    cfg = resolve_run_config(paths, config_path, overrides)
    fix_spec(paths, spec)
    result = ImportResult(paths, spec)
    if task is not None or spec.tasks == 1:
        if cluster == "slurm":
            raise AzhpcError("--cluster slurm submits an array of --tasks T > 1 (without --task): one task runs here")
        result.progress.append(run_import_task(paths.root, spec, task or 0))
        return result
    cluster = cluster or planning.detect_cluster()
    _, todo = import_state(paths)
    if cluster == "slurm":
        from .slurm import SlurmChain

        recorded = atomic.read_json(paths.import_jobs) if paths.import_jobs.exists() else {}
        known = recorded.get("jobs", [])
        live = _active(recorded, paths) if todo else []
        if live:  # its tasks would run twice, side by side, writing the same shards
            raise AzhpcError(f"the import into {paths.root} is still queued or running (SLURM job(s) {', '.join(live)}): "
                             f"follow it with azhpc status {paths.root}, or scancel it before importing again")
        plan = planning.make_plan(cfg, "slurm", array_size=planning.max_array_size())
        chain = SlurmChain(paths, cfg, plan)
        result.jobs = chain.submit_import(todo) if todo else []
        atomic.write_json(paths.import_jobs, {"jobs": known + result.jobs, "updated": time.time(), "user": getpass.getuser()},
                          doing="recording import jobs")
        return result
    _run_local(paths, todo, result)
    return result


def import_jobs_to_wait_for(paths: RunPaths, cluster: str, ranks: int = 1) -> list[str]:
    """The import arrays that pretraining must wait for: none when the import is done; on SLURM those still queued
    or running. An import neither done nor coming is one line with the fix (rerun import-pgn: it continues), and so
    is a finished one with fewer shards than the pretraining job has ranks (each rank reads whole shards)."""
    from ..train.data import imported_window

    waiting: list[str] = []
    if cluster == "slurm" and paths.import_jobs.exists():  # asked before the progress is read: a task that ends in
        waiting = _active(atomic.read_json(paths.import_jobs), paths)  # between is then seen done, not "neither done nor queued"
    spec, todo = import_state(paths)
    if not todo:
        shards = len(imported_window(paths))
        if not shards:
            raise AzhpcError(f"the import in {paths.root} finished with no games kept (azhpc status {paths.root} counts "
                             "what was left out and why): import files that pass the filters (--min-elo, --speeds, "
                             "--ending) into a new run folder")
        if shards < ranks:
            raise AzhpcError(f"the import in {paths.root} has {shards} shard(s) for a pretraining job of {ranks} ranks, "
                             "each of which reads whole shards: import again into a new run folder with a smaller "
                             "--games-per-shard, or launch with fewer --nodes/--gpus-per-node")
        return []
    if not waiting:
        raise AzhpcError(f"the import into {paths.root} is not finished (tasks {', '.join(map(str, todo[:8]))} of "
                         f"{spec.tasks} are not done) and none of it is queued: rerun azhpc import-pgn {paths.root} with "
                         "the same files (it continues), then launch or resume")
    return waiting


def _active(recorded: dict, paths: RunPaths) -> list[str]:
    """The import arrays in ``recorded`` (``import/jobs.json``) that SLURM still has queued or running, asked for the
    user who submitted them (for a record from before it named them, the owner of the run's folder)."""
    from ..cluster import scheduler

    jobs = [str(j) for j in recorded.get("jobs", [])]
    states = scheduler.query(jobs, recorded.get("user", "") or scheduler.owner(paths.root)) if jobs else {}
    return [j for j in jobs if any(st.active for jid, st in states.items() if jid.split("_")[0] == j)]


def _run_local(paths: RunPaths, todo: list[int], result: ImportResult) -> None:
    """Each task a fresh process (``python -m alphazero_hpc.launch.stages import RUN T``), up to the cores at once."""
    parallel = max(1, min(len(todo), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
    paths.logs.mkdir(parents=True, exist_ok=True)
    running: list[tuple[int, subprocess.Popen]] = []
    queue = list(todo)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    try:
        while queue or running:
            while queue and len(running) < parallel:
                t = queue.pop(0)
                with open(paths.stage_log(f"local-import-task{t:04d}"), "ab") as log:
                    running.append((t, subprocess.Popen([sys.executable, "-m", "alphazero_hpc.launch.stages", "import",
                                                         str(paths.root), str(t)], stdout=log, stderr=subprocess.STDOUT,
                                                        stdin=subprocess.DEVNULL, env=env)))
            time.sleep(0.2)
            for t, proc in list(running):
                if proc.poll() is not None:
                    running.remove((t, proc))
                    p = read_import_progress(paths.import_progress(t))
                    if proc.returncode != 0 or p is None or p.status != "done":
                        why = (p.error if p is not None and p.error else f"exit status {proc.returncode}")
                        result.failed.append(f"import task {t}: {why} (log {paths.stage_log(f'local-import-task{t:04d}')})")
                    if p is not None:
                        result.progress.append(p)
    finally:
        for _, proc in running:
            proc.terminate()
            proc.wait()
    result.progress.sort(key=lambda p: p.task)
