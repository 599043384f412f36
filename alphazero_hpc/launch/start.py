"""``launch()``: resolve the run's config and plan, record them, then submit the chain (SLURM) or start the
local supervisor (``report.follow`` follows the run from there)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..cluster import scheduler
from ..net.checkpoint import ensure_initial_checkpoint
from ..config import Config, load_config
from ..errors import AzhpcError, RunDirError, describe_os_error
from ..store.paths import DEFAULT_ROOT, RunPaths, check_run_root
from ..store.runconfig import resolve_run_config
from . import plan as planning
from .importing import import_jobs_to_wait_for
from .record import LaunchRecord, record_lock, write_record
from .window import first_window


@dataclass
class LaunchResult:
    paths: RunPaths
    plan: planning.LaunchPlan
    record: LaunchRecord | None = None
    scripts: list[tuple[str, str]] = field(default_factory=list)  # dry run: (what, sbatch script)
    window: str = ""  # SLURM: how many generations were submitted now, and the limit that decided it
    supervisor_pid: int = 0


def _plan(cfg: Config, cluster: str, pretrain: bool = False) -> planning.LaunchPlan:
    if cluster == "slurm":
        return planning.make_plan(cfg, "slurm", array_size=planning.max_array_size(), pretrain=pretrain)
    gpus, cpus = planning.local_devices()
    return planning.make_plan(cfg, "local", local_gpus=gpus if cfg.slurm.gpus_per_node else 0, local_cpus=cpus,
                              pretrain=pretrain)


def new_run_dir(root: Path = DEFAULT_ROOT) -> Path:
    """A new, empty run folder ``root/run-DATE-TIME`` (``-2``, ``-3``, ... when launches share a second), made
    here: mkdir is atomic, so two launches never get the same one."""
    base = root / time.strftime("run-%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RunDirError(f"no free run folder name under {root}: pass --run-dir")


def launch(run_dir: Path | None, config_path: str | Path | None, overrides: Sequence[str], cluster: str | None = None,
           dry_run: bool = False, detach: bool = True, command: str = "", pretrain: bool = False) -> LaunchResult:
    """Launch a run into ``run_dir`` (None: a new folder under scratch/). The whole launch holds the run's lock;
    a launch that fails removes the folder only when it made the folder itself. With ``pretrain`` generation 0's
    network is first trained on the games ``azhpc import-pgn`` imported into ``run_dir``."""
    if pretrain and run_dir is None:
        raise AzhpcError("--pretrain trains on games imported into a run folder: azhpc import-pgn RUN FILE ..., "
                         "then azhpc launch --run-dir RUN --pretrain")
    asked = cluster
    cluster = cluster or planning.detect_cluster()
    if dry_run:
        paths = RunPaths(Path(run_dir) if run_dir is not None else DEFAULT_ROOT / time.strftime("run-%Y%m%d-%H%M%S"))
        if cluster != "slurm":
            raise AzhpcError("--dry-run prints SLURM job scripts: add --cluster slurm (no cluster is needed to print them)")
        cfg = load_config(config_path, overrides)
        plan = _plan(cfg, "slurm", pretrain)
        from .slurm import SlurmChain

        w = first_window(cfg, plan, int(plan.pretrain))
        chain = SlurmChain(paths, cfg, plan, dry_run=True)
        chain.submit_generations(0, w.generations)
        return LaunchResult(paths, plan, scripts=chain.scripts, window=w.describe())

    if asked == "slurm" and planning.detect_cluster() != "slurm":
        raise AzhpcError("no SLURM cluster answers here (sinfo failed or is missing): run on a login node, "
                         "or use --cluster local (slurm/testbed/testbed.sh starts a test cluster)")
    if run_dir is None:
        paths, made = RunPaths(new_run_dir()), True
    else:
        paths = RunPaths(check_run_root(Path(run_dir)))
        try:
            paths.root.mkdir(parents=True)
            made = True
        except FileExistsError:
            made = False
        except OSError as exc:
            raise describe_os_error(exc, paths.root, "making the run folder") from exc
    with record_lock(paths, f"azhpc launch{' (' + command + ')' if command else ''}"):
        try:
            if paths.launch_record.exists():
                raise RunDirError(f"{paths.root} was already launched ({paths.launch_record}): follow it with azhpc status "
                                  f"{paths.root}, or choose a new --run-dir")
            if paths.generations():
                raise RunDirError(f"{paths.root} already holds self-play data made outside azhpc launch: choose a new --run-dir")
            return _launch(paths, config_path, overrides, cluster, detach, command, pretrain)
        except BaseException:
            if made:  # this call made the folder and held it throughout: leave no half-made run folder behind
                shutil.rmtree(paths.root, ignore_errors=True)
            raise


def _launch(paths: RunPaths, config_path, overrides: Sequence[str], cluster: str, detach: bool, command: str,
            pretrain: bool = False) -> LaunchResult:
    given = config_path is not None or bool(overrides) or not paths.config.exists()
    cfg = load_config(config_path, overrides) if given else resolve_run_config(paths)
    plan = _plan(cfg, cluster, pretrain)  # raises on a plan that cannot run, before anything is written
    after_import = import_jobs_to_wait_for(paths, cluster, plan.world_size) if pretrain else []
    resolve_run_config(paths, config_path, overrides)  # writes config.yaml, or checks it agrees
    if not pretrain:
        ensure_initial_checkpoint(paths.model(0), cfg.model, cfg.run.seed)
    record = LaunchRecord(plan=plan, command=command)
    if cluster == "local":
        write_record(paths, record)
        result = LaunchResult(paths, plan, record)
        if detach:
            from .local import start_detached

            result.supervisor_pid = start_detached(paths.root)
        return result

    from .slurm import SlurmChain

    w = first_window(cfg, plan, int(pretrain))
    chain = SlurmChain(paths, cfg, plan)
    try:
        record.jobs = chain.submit_generations(0, w.generations, after_import=after_import)
    except BaseException:
        scheduler.cancel([j.job_id for j in chain.submitted])  # no half chain left queued
        raise
    record.events.append({"time": time.time(), "event": "launch", "generations": [0, w.generations - 1], "window": w.describe()})
    write_record(paths, record)
    return LaunchResult(paths, plan, record, window=w.describe())
