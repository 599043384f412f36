"""What a launch runs: tasks per generation, ranks per training job, how arrays are split. No side effects
except asking the machine what it has (``detect_cluster``, ``max_array_size``, ``local_devices``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass

from ..config import Config
from ..errors import AzhpcError
from ..selfplay.plan import plan_task

CLUSTERS = ("slurm", "local")
DEFAULT_MAX_ARRAY_SIZE = 1001  # SLURM's default MaxArraySize


@dataclass(frozen=True)
class LaunchPlan:
    cluster: str  # slurm or local
    generations: int  # self-play + training rounds; the last writes models/gen-<generations>.pt
    tasks: int  # self-play tasks per generation
    nodes: int  # nodes of a training job (local: 1)
    gpus_per_node: int  # GPUs per node (0: CPU only); a training job runs max(1, this) ranks per node
    parallel: int  # local: self-play tasks running at once; slurm: array throttle
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    pretrain: bool = False  # generation 0's network is trained on the imported games first (azhpc import-pgn)

    @property
    def ranks_per_node(self) -> int:
        return max(1, self.gpus_per_node)

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "LaunchPlan":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def split_tasks(tasks: int, max_array_size: int) -> list[range]:
    """Array elements are numbered 0..size-1 and SLURM rejects an index >= MaxArraySize: split into chunks."""
    size = max(1, max_array_size)
    return [range(start, min(start + size, tasks)) for start in range(0, tasks, size)]


def detect_cluster() -> str:
    """slurm when the SLURM commands answer (a controller is reachable), else local."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "local"
    try:
        ok = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return "slurm" if ok else "local"


def max_array_size() -> int:
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_MAX_ARRAY_SIZE
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m else DEFAULT_MAX_ARRAY_SIZE


def local_devices() -> tuple[int, int]:
    """(GPUs, CPU cores) of this machine, without creating a CUDA context in this process."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    gpus = 0
    try:
        import torch

        gpus = torch.cuda.device_count()  # NVML-based: does not initialise CUDA here
    except Exception:  # noqa: BLE001 - a broken CUDA install means no GPU
        gpus = 0
    return gpus, cpus


def make_plan(cfg: Config, cluster: str, *, local_gpus: int = 0, local_cpus: int = 1,
              array_size: int = DEFAULT_MAX_ARRAY_SIZE, pretrain: bool = False) -> LaunchPlan:
    """Check that the config can run as asked and say how; raises AzhpcError naming the fix."""
    if cluster not in CLUSTERS:
        raise AzhpcError(f"unknown cluster '{cluster}': use --cluster slurm or --cluster local")
    s = cfg.slurm
    if cluster == "slurm":
        tasks = s.selfplay_tasks or s.nodes * max(1, s.gpus_per_node)
        plan = LaunchPlan("slurm", cfg.run.generations, tasks, s.nodes, s.gpus_per_node, parallel=tasks,
                          max_array_size=array_size, pretrain=pretrain)
    else:
        if s.nodes != 1:
            raise AzhpcError(f"--nodes {s.nodes} needs a cluster: a local run uses this machine only (drop --nodes or use --cluster slurm)")
        gpus = local_gpus
        tasks = s.selfplay_tasks or (gpus if gpus else max(1, min(local_cpus, 8)))
        parallel = max(1, min(tasks, gpus if gpus else local_cpus))
        plan = LaunchPlan("local", cfg.run.generations, tasks, 1, gpus, parallel=parallel, pretrain=pretrain)
    _check_fits(cfg, plan)
    return plan


def _check_fits(cfg: Config, plan: LaunchPlan) -> None:
    """Problems that would otherwise surface as a failed job an hour into the run."""
    if cfg.mcts.precision == "int8" and plan.gpus_per_node > 0:
        fix = ("slurm.gpus_per_node: 0 for tasks on CPUs only" if plan.cluster == "slurm"
               else "hide the GPUs (CUDA_VISIBLE_DEVICES=) to play on the CPU")
        raise AzhpcError(f"mcts.precision int8 runs the network on a CPU only, and this run gives each self-play task a "
                         f"GPU ({plan.gpus_per_node} per node): set mcts.precision to bf16 or auto for GPUs, or {fix}")
    games = cfg.selfplay.games_per_generation
    if games < plan.tasks:
        raise AzhpcError(f"selfplay.games_per_generation ({games}) is below the {plan.tasks} self-play tasks: "
                         f"raise it or set slurm.selfplay_tasks")
    shards = sum(plan_task(cfg, t, plan.tasks).shards for t in range(plan.tasks))
    if shards < plan.world_size:
        raise AzhpcError(f"a generation makes {shards} shards but training has {plan.world_size} ranks, and each rank needs "
                         f"its own shards: lower selfplay.games_per_shard or use fewer nodes/GPUs")
    if cfg.train.batch_size % plan.world_size:
        raise AzhpcError(f"train.batch_size {cfg.train.batch_size} does not split over {plan.world_size} training ranks "
                         f"({plan.nodes} nodes x {plan.ranks_per_node}): make it a multiple of {plan.world_size}")
