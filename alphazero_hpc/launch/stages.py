"""What a compute node runs: one self-play task, or one node's share of a training job.

Both are plain module-level functions, which submitit pickles by reference and runs in a fresh process
(``srun python -m submitit.core._submit``), and a small command line for the local supervisor and the
sbatch templates::

    python -m alphazero_hpc.launch.stages selfplay RUN GENERATION TASK NUM_TASKS
    python -m alphazero_hpc.launch.stages train RUN GENERATION [--nproc-per-node N]
    python -m alphazero_hpc.launch.stages init RUN --config C [--set k=v]     (config.yaml, models/gen-0000.pt)

A training job starts ``torchrun`` on each node: c10d rendezvous on the allocation's first node, the job id
as rendezvous id, so ranks meet wherever SLURM placed them. Outside SLURM it runs ``torchrun --standalone``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .. import fsutil
from ..checkpoint import ensure_initial_checkpoint
from ..config import Config
from ..errors import AzhpcError
from ..paths import RunPaths
from ..progress import read_progress
from ..run import read_run_config, resolve_run_config
from ..shards import read_sidecar

RDZV_PORT_BASE = 29400


def selfplay_stage(run_dir: str, generation: int, task: int, num_tasks: int) -> dict:
    """One array element: the task's missing shards of ``generation`` (see worker.run_selfplay_task)."""
    from ..worker import run_selfplay_task

    p = run_selfplay_task(run_dir, generation, task, num_tasks)
    return {"task": task, "games": p.games_in_shards, "positions": p.positions, "shards": p.shards_done}


def generation_games(paths: RunPaths, generation: int) -> tuple[int, int, int]:
    """(games, positions, shards) of a generation's complete shards, from the sidecars (a sidecar that
    cannot be read counts as a shard but adds no games or positions)."""
    games = positions = shards = 0
    folder = paths.selfplay(generation)
    for sidecar in sorted(folder.glob("task-*/shard-*.json")) if folder.is_dir() else []:
        shards += 1
        try:
            meta = read_sidecar(sidecar)
        except AzhpcError:
            continue  # the trainer reports and skips it
        games += int(meta["games"])
        positions += int(meta["rows"])
    return games, positions, shards


def check_min_data(cfg: Config, paths: RunPaths, generation: int) -> int:
    """The minimum-data rule: train only when enough of the generation's games exist. Returns the games."""
    planned = cfg.selfplay.games_per_generation
    games, _, _ = generation_games(paths, generation)
    need = max(1, int(round(cfg.train.min_selfplay_fraction * planned)))
    if games < need:
        raise AzhpcError(
            f"generation {generation} has {games} of its {planned} games in complete shards, below the minimum {need} "
            f"(train.min_selfplay_fraction={cfg.train.min_selfplay_fraction}): self-play tasks failed, "
            f"azhpc status {paths.root} shows which and why")
    return games


def _slurm_nodes() -> tuple[int, int, str, str] | None:
    """(nodes, this node's index, first node's name, job id) inside a SLURM job step, else None."""
    e = os.environ
    if "SLURM_JOB_ID" not in e or "SLURM_STEP_ID" not in e:
        return None
    nodes = int(e.get("SLURM_JOB_NUM_NODES") or e.get("SLURM_NNODES") or 1)
    first = subprocess.run(["scontrol", "show", "hostnames", e["SLURM_JOB_NODELIST"]], capture_output=True, text=True,
                           check=True).stdout.split()[0]
    return nodes, int(e.get("SLURM_NODEID", 0)), first, e["SLURM_JOB_ID"]


def torchrun_command(run_dir: str, generation: int, nproc_per_node: int, slurm: tuple[int, int, str, str] | None) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if slurm is None:
        cmd.append("--standalone")
    else:
        nodes, _, first, job_id = slurm
        port = RDZV_PORT_BASE + int(job_id) % 1000 if job_id.isdigit() else f"$(({RDZV_PORT_BASE} + SLURM_JOB_ID % 1000))"
        cmd += [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={first}:{port}", f"--rdzv-id={job_id}"]
    return cmd + ["-m", "alphazero_hpc.train", "--run-dir", str(run_dir), "--generation", str(generation)]


class _TrainProgress:
    """``train/gen-(G+1)/progress.json``, written by the first node only."""

    def __init__(self, paths: RunPaths, generation: int, enabled: bool, nodes: int, ranks: int) -> None:
        self.path = paths.train_progress(generation + 1)
        self.enabled = enabled
        previous = read_progress(self.path) or {}
        self.data = {"generation": generation + 1, "trained_from": generation, "status": "starting",
                     "attempt": int(previous.get("attempt", 0)) + 1, "host": socket.gethostname(), "pid": os.getpid(),
                     "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
                     "restart_count": int(os.environ.get("SLURM_RESTART_COUNT", 0) or 0),
                     "nodes": nodes, "ranks": ranks, "started": time.time(), "updated": time.time(), "error": ""}

    def write(self, **changes) -> None:
        if self.enabled:
            self.data.update(changes, updated=time.time())
            fsutil.write_json(self.path, self.data, doing="writing training progress")


def train_stage(run_dir: str, generation: int, nproc_per_node: int = 1) -> dict:
    """Train ``generation``'s window on this node's ``nproc_per_node`` ranks; writes models/gen-(G+1).pt."""
    paths = RunPaths(Path(run_dir))
    cfg = read_run_config(paths)
    slurm = _slurm_nodes()
    nodes, node_index = (slurm[0], slurm[1]) if slurm else (1, 0)
    out = paths.model(generation + 1)
    progress = _TrainProgress(paths, generation, node_index == 0, nodes, nodes * nproc_per_node)
    if out.exists():
        progress.write(status="done")
        return {"generation": generation + 1, "status": "exists"}
    try:
        if not paths.model(generation).exists():
            raise AzhpcError(f"{paths.model(generation)} is missing: generation {generation}'s network was never written "
                             f"(its training failed?); see azhpc status {paths.root}")
        check_min_data(cfg, paths, generation)
        progress.write(status="running")
        code, error = _run_forwarding_errors(torchrun_command(run_dir, generation, nproc_per_node, slurm))
        if code != 0:
            raise AzhpcError(error or f"torchrun exited with status {code}; the job log has the details")
        if node_index == 0 and not out.exists():
            raise AzhpcError(f"training finished without writing {out}; the job log has the details")
    except BaseException as exc:
        progress.write(status="failed", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    progress.write(status="done")
    return {"generation": generation + 1, "status": "trained", "node": node_index}


def _run_forwarding_errors(cmd: list[str]) -> tuple[int, str]:
    """Run ``cmd``, pass its stderr through, and return (exit status, the trainer's last one-line error)."""
    error = ""
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": os.environ.get("HDF5_USE_FILE_LOCKING", "FALSE")}
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                sys.stderr.write(line)
                if line.startswith("Error: "):
                    error = line[len("Error: "):].strip()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            raise
    return proc.returncode, error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alphazero_hpc.launch.stages", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sp = sub.add_parser("selfplay")
    sp.add_argument("run_dir")
    sp.add_argument("generation", type=int)
    sp.add_argument("task", type=int)
    sp.add_argument("num_tasks", type=int)
    tr = sub.add_parser("train")
    tr.add_argument("run_dir")
    tr.add_argument("generation", type=int)
    tr.add_argument("--nproc-per-node", type=int, default=1)
    ini = sub.add_parser("init", help="write the run's config.yaml and generation 0's network (idempotent)")
    ini.add_argument("run_dir")
    ini.add_argument("--config", default=None)
    ini.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        if args.stage == "init":
            paths = RunPaths(Path(args.run_dir))
            cfg = resolve_run_config(paths, args.config, args.overrides)
            ensure_initial_checkpoint(paths.model(0), cfg.model, cfg.run.seed)
            print(f"{paths.root}: config.yaml and {paths.model(0)} ready", flush=True)
        elif args.stage == "selfplay":
            print(selfplay_stage(args.run_dir, args.generation, args.task, args.num_tasks), flush=True)
        else:
            print(train_stage(args.run_dir, args.generation, args.nproc_per_node), flush=True)
    except (AzhpcError, OSError) as exc:
        if os.environ.get("AZHPC_DEBUG"):
            raise
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
