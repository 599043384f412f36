"""What a compute node runs: one self-play task, or one node's share of a training job.

Both are plain module-level functions, which submitit pickles by reference and runs in a fresh process
(``srun python -m submitit.core._submit``), and a small command line for the local supervisor and the
sbatch templates::

    python -m alphazero_hpc.launch.stages selfplay RUN GENERATION TASK NUM_TASKS
    python -m alphazero_hpc.launch.stages train RUN GENERATION [--nproc-per-node N]   (GENERATION -1: pretraining)
    python -m alphazero_hpc.launch.stages import RUN TASK                      (an azhpc import-pgn task)
    python -m alphazero_hpc.launch.stages eval RUN GENERATION                 (eval.opponents, into the ledger)
    python -m alphazero_hpc.launch.stages init RUN --config C [--set k=v]     (config.yaml, models/gen-0000.pt)

A training job starts ``torchrun`` on each node: c10d rendezvous on the allocation's first node, the job id
as rendezvous id, so ranks meet wherever SLURM placed them. Outside SLURM it runs ``torchrun --standalone``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from dataclasses import dataclass
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Literal

import submitit

from ..store import atomic
from ..cluster import preempt, procs
from ..cluster.slurmenv import RDZV_PORT_BASE, SlurmEnv, without_job_environment
from ..config import Config
from ..errors import AzhpcError, failure_line, report
from ..store.paths import RunPaths, check_run_root
from ..store.progress import Ended, TrainProgress, clear_train_outcomes, read_train_outcomes, read_train_progress
from ..store.runconfig import read_run_config, resolve_run_config
from ..store.shards import generation_totals


def _requeue(what: str, reason: str) -> None:
    """After a stage stopped in time: have SLURM run it again, then wait to be killed by the requeue.
    A stop because of SIGTERM needs nothing: SLURM is already ending the job (requeue, preemption, scancel)."""
    if "SIGTERM" in reason or not SlurmEnv.now().in_job:
        return
    print(f"{what} stopped ({reason}); asking SLURM to requeue job {preempt.slurm_job_id()}", file=sys.stderr, flush=True)
    error = preempt.requeue_this_job()
    if error:
        raise AzhpcError(f"{what} stopped before its time limit ({reason}) but could not be requeued: {error}; "
                         f"azhpc resume submits it again")
    time.sleep(600)  # the requeue kills this job within KillWait
    raise AzhpcError(f"{what} was requeued but is still running after 600 s: azhpc resume submits it again")


class SelfPlayStage(submitit.helpers.Checkpointable):
    """One array element: the task's missing shards of ``generation`` (see selfplay.task.run_selfplay_task).

    Stops before the job's time limit and requeues its job; on SLURM's USR2 submitit calls ``checkpoint``
    (the same call again: the state is the complete shards on disk) and requeues the job."""

    def __call__(self, run_dir: str, generation: int, task: int, num_tasks: int) -> StageResult:
        from ..selfplay.task import run_selfplay_task

        p = run_selfplay_task(run_dir, generation, task, num_tasks, deadline=preempt.Deadline.of_this_job())
        if p.status == "stopped":
            _requeue(f"generation {generation} self-play task {task}", p.error)
        return _finished(StageResult("selfplay", _ended(p.status), {"task": task, "games": p.games_in_shards,
                                                                   "positions": p.positions, "shards": p.shards_done}))


selfplay_stage = SelfPlayStage()


class ImportStage(submitit.helpers.Checkpointable):
    """One element of an ``azhpc import-pgn --tasks`` array: the task's missing shards (the files and filters are
    in ``RUN/import/import.json``). Stops before the time limit and requeues, like a self-play task."""

    def __call__(self, run_dir: str, task: int) -> StageResult:
        from ..pgn.task import read_spec, run_import_task

        spec = read_spec(RunPaths(Path(run_dir)))
        p = run_import_task(run_dir, spec, task, deadline=preempt.Deadline.of_this_job())
        if p.status == "stopped":
            _requeue(f"import task {task}", p.error)
        return _finished(StageResult("import", _ended(p.status), {"task": task, "games": p.games, "positions": p.positions,
                                                                 "malformed": p.malformed}))


import_stage = ImportStage()


def check_import_done(paths: RunPaths) -> int:
    """Pretraining's data rule: every import task done and some positions. Returns the positions."""
    from ..pgn.task import import_state, import_totals

    spec, todo = import_state(paths)
    if todo:
        raise AzhpcError(f"import tasks {', '.join(map(str, todo[:8]))} of {spec.tasks} are not done: rerun azhpc import-pgn "
                         f"{paths.root} with the same files (it continues), then azhpc resume {paths.root}")
    _, positions, _ = import_totals(paths)
    if not positions:
        raise AzhpcError(f"the import in {paths.root} kept no games (see azhpc status {paths.root}): import other files "
                         f"or relax --min-elo/--speeds/--ending")
    return positions


def check_min_data(cfg: Config, paths: RunPaths, generation: int) -> int:
    """The minimum-data rule: train only when enough of the generation's games exist. Returns the games."""
    planned = cfg.selfplay.games_per_generation
    games, _, _ = generation_totals(paths, generation)
    need = max(1, int(round(cfg.train.min_selfplay_fraction * planned)))
    if games < need:
        raise AzhpcError(
            f"generation {generation} has {games} of its {planned} games in complete shards, below the minimum {need} "
            f"(train.min_selfplay_fraction={cfg.train.min_selfplay_fraction}): self-play tasks failed, "
            f"azhpc status {paths.root} shows which and why")
    return games


def _slurm_nodes() -> tuple[int, int, str, str] | None:
    """(nodes, this node's index, first node's name, job id) inside a SLURM job step, else None."""
    env = SlurmEnv.now()
    if not env.in_step:
        return None
    return env.num_nodes, env.nodeid, env.first_node, env.job_id


def alone(nproc_per_node: int, slurm: tuple[int, int, str, str] | None) -> bool:
    """One rank on one node: nothing to meet, so the rank runs without torchrun (whose agent is one more process
    that imports torch, ~2 CPU-seconds and a few seconds of wall clock at every training start)."""
    return nproc_per_node == 1 and (slurm is None or slurm[0] == 1)


def torchrun_command(run_dir: str, generation: int, nproc_per_node: int, slurm: tuple[int, int, str, str] | None,
                     outcomes: Path | None = None, log_dir: str | None = None) -> list[str]:
    """The command that starts this node's training ranks: torchrun, or the rank itself when it is ``alone``;
    with ``outcomes``, each rank writes how it ended there; ``log_dir``: torchrun's log folder (``torchrun_logs``)."""
    if alone(nproc_per_node, slurm):
        cmd = [sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(run_dir), "--generation", str(generation)]
        return cmd + (["--outcomes", str(outcomes)] if outcomes is not None else [])
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if log_dir is not None:
        cmd.append(f"--log-dir={log_dir}")
    if slurm is None:
        cmd.append("--standalone")
    else:
        nodes, _, first, job_id = slurm
        port = SlurmEnv(job_id=job_id).rendezvous_port if job_id.isdigit() else f"$(({RDZV_PORT_BASE} + SLURM_JOB_ID % 1000))"
        cmd += [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={first}:{port}", f"--rdzv-id={job_id}"]
    cmd += ["-m", "alphazero_hpc.train", "--run-dir", str(run_dir), "--generation", str(generation)]
    return cmd + (["--outcomes", str(outcomes)] if outcomes is not None else [])


class _TrainProgress:
    """``train/gen-(G+1)/progress.json``, written by the first node only."""

    def __init__(self, paths: RunPaths, generation: int, enabled: bool, nodes: int, ranks: int) -> None:
        self.path = paths.train_progress(generation + 1)
        self.enabled = enabled
        previous = read_train_progress(self.path)
        self.data = TrainProgress(generation + 1, generation, attempt=(previous.attempt if previous else 0) + 1,
                                  nodes=nodes, ranks=ranks)

    def write(self, **changes) -> None:
        if self.enabled:
            self.data = dataclasses.replace(self.data, **changes, updated=time.time())
            atomic.write_json(self.path, self.data.to_json(), doing="writing training progress")


@contextlib.contextmanager
def torchrun_logs(folder: Path | None = None) -> Iterator[str]:
    """A log folder for one torchrun start, gone when the ``with`` block ends: without one, torchrun makes an
    /tmp/torchelastic_* per start (empty without --redirects) and never removes it, one a generation on every node.
    ``folder`` (the stage's, in the run folder): emptied first, so a slice killed before its end (SIGKILL, a lost
    node) leaves its folder to the next slice rather than to the node's /tmp; otherwise a temporary folder."""
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="azhpc-torchrun-", ignore_cleanup_errors=True) as logs:
            yield logs
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)  # what rmtree could not remove stays: torchrun makes its own subfolder
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_torchrun: subprocess.Popen | None = None  # the running torchrun agent (module level: the stage is pickled)


@dataclass(frozen=True)
class StageResult:
    """What a stage's process did (its last stdout line, and its submitit job's result). A stage that fails raises
    instead, so ``status`` is ``done`` or ``stopped`` (stopped in time, work kept; its job is requeued)."""

    stage: Literal["selfplay", "import", "train"]
    status: Ended
    counts: dict[str, int]  # what it has done, all attempts: task/games/positions/shards, or generation/node

    def __str__(self) -> str:
        return f"{self.stage} {self.status}: " + ", ".join(f"{k} {v}" for k, v in self.counts.items())


def _finished(result: StageResult) -> StageResult:
    """A stage that returns done: a USR2 after this must not undo it (``preempt.work_finished``)."""
    if result.status == "done":
        preempt.work_finished()
    return result


def forward_stop(signum: int = 0, frame=None) -> None:  # noqa: ARG001 - also a signal handler
    """Tell the training ranks to save their state and stop: USR2 to torchrun's tree (torchrun ignores it)."""
    if _torchrun is not None and _torchrun.poll() is None:
        preempt.signal_tree(_torchrun.pid, signal.SIGUSR2)


class TrainStage(submitit.helpers.Checkpointable):
    """One node's share of a training job (see ``train_stage``). On SLURM's USR2 submitit calls
    ``checkpoint`` on the first node: the ranks save their state and exit, then submitit requeues the job."""

    def __call__(self, run_dir: str, generation: int, nproc_per_node: int = 1) -> StageResult:
        return _finished(train_stage(run_dir, generation, nproc_per_node))

    def checkpoint(self, *args, **kwargs):
        forward_stop()
        if _torchrun is not None:
            # the ranks save and exit; but the requeue must be asked for before the time limit, or SLURM ends the job
            # as TIMEOUT and nothing requeues it (seen on a loaded node, where the ranks were still starting)
            left = preempt.Deadline.of_this_job().remaining()
            try:
                _torchrun.wait(timeout=max(1.0, min(120.0, left - 8.0)))
            except subprocess.TimeoutExpired:
                pass  # the requeue kills what is left; the last periodic state is on disk
        return super().checkpoint(*args, **kwargs)


def train_stage(run_dir: str, generation: int, nproc_per_node: int = 1) -> StageResult:
    """Train ``generation``'s window on this node's ``nproc_per_node`` ranks; writes models/gen-(G+1).pt.
    Stopped in time (signal, time limit) the ranks save their state; the first node then requeues the job."""
    paths = RunPaths(Path(run_dir))
    cfg = read_run_config(paths)
    slurm = _slurm_nodes()
    nodes, node_index = (slurm[0], slurm[1]) if slurm else (1, 0)
    out = paths.model(generation + 1)
    progress = _TrainProgress(paths, generation, node_index == 0, nodes, nodes * nproc_per_node)
    counts = {"generation": generation + 1, "node": node_index}
    if out.exists():
        progress.write(status="done")
        _extend(paths, generation, node_index)
        return StageResult("train", "done", counts)
    try:
        if generation < 0:
            check_import_done(paths)
        elif not paths.model(generation).exists():
            raise AzhpcError(f"{paths.model(generation)} is missing: generation {generation}'s network was never written "
                             f"(its training failed?); see azhpc status {paths.root}")
        else:
            check_min_data(cfg, paths, generation)
        progress.write(status="running")
        lone = alone(nproc_per_node, slurm)
        with contextlib.nullcontext(None) if lone else torchrun_logs(paths.torchrun_logs(generation + 1, node_index)) as logs:
            code, error, stopped = _run_torchrun(torchrun_command(run_dir, generation, nproc_per_node, slurm,
                                                                  paths.train_outcomes(generation + 1, node_index), log_dir=logs),
                                                 lone=lone)
        if stopped and not error:
            progress.write(status="stopped", error=stopped)
            if node_index == 0:
                _requeue(f"generation {generation} training", stopped)
            return StageResult("train", "stopped", counts)
        if code != 0 and (error or not (node_index == 0 and out.exists())):  # a written network stands
            raise AzhpcError(error or f"{'the training rank' if lone else 'torchrun'} exited with status {code}; the job "
                                      f"log has the details")
        if node_index == 0 and not out.exists():
            raise AzhpcError(f"training finished without writing {out}; the job log has the details")
    except SystemExit:  # submitit's requeue on USR2 (after TrainStage.checkpoint)
        progress.write(status="stopped", error="stopped by SLURM's warning signal, requeued")
        raise
    except BaseException as exc:
        progress.write(status="failed", error=failure_line(exc))
        raise
    progress.write(status="done")
    _extend(paths, generation, node_index)
    return StageResult("train", "done", counts)


def _extend(paths: RunPaths, generation: int, node_index: int) -> None:
    """The first node of a SLURM training job whose network is written submits the generations that now fit
    under the site's submit limit (launch/window.py)."""
    if node_index == 0 and SlurmEnv.now().in_job:  # its own process: the window module submits through this one's callers
        left = preempt.Deadline.of_this_job().remaining()  # inf without a time limit
        if left < 30:
            print(f"chain: {left:.0f} s left in the job, too little to submit the next generations; azhpc resume "
                  f"{paths.root} submits what is missing", file=sys.stderr, flush=True)
            return
        try:
            with subprocess.Popen([sys.executable, "-m", "alphazero_hpc.launch.window", str(paths.root), str(generation)],
                                  env=without_job_environment()) as proc:
                try:
                    proc.wait(timeout=min(600.0, left - 20))
                except subprocess.TimeoutExpired:
                    proc.terminate()  # SIGTERM: it cancels what it submitted (whole generations or nothing), then exits
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    raise
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"chain: the extension did not run ({failure_line(exc)}); azhpc resume {paths.root} submits what is "
                  f"missing", file=sys.stderr, flush=True)


def _run_torchrun(cmd: list[str], lone: bool = False) -> tuple[int, str, str]:
    """Run torchrun ``cmd`` with USR2 ignored (SLURM signals every process of the step: the agent must survive it,
    the ranks handle it), its output passed through, and return (exit status, a failed rank's error line, a stopped
    rank's message) from the outcome records that this node's ranks wrote (``--outcomes``)."""
    global _torchrun
    folder = Path(cmd[cmd.index("--outcomes") + 1])
    clear_train_outcomes(folder)  # an earlier attempt's
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": os.environ.get("HDF5_USE_FILE_LOCKING", "FALSE")}
    if lone:  # the rank started without torchrun: a world of one, whatever an enclosing srun step's task count says
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    ignoring_usr2 = ["/bin/sh", "-c", 'trap "" USR2; exec "$@"', "torchrun", *cmd]  # SIG_IGN survives exec
    # a stage killed hard (SIGKILL, the OOM killer) takes torchrun with it: its ranks save their state and stop
    # instead of training on beside the next attempt's
    with subprocess.Popen(ignoring_usr2, env=env, preexec_fn=procs.die_with_parent) as proc:
        _torchrun = proc
        try:
            proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            raise
        finally:
            _torchrun = None
    outcomes = read_train_outcomes(folder)
    failed = [o.message for o in outcomes if o.status == "failed"]
    stopped = [o.message for o in outcomes if o.status == "stopped"]
    return proc.returncode, (failed[0] if failed else ""), (stopped[0] if stopped else "")


def _ended(status: str) -> Ended:
    """A task's progress status once its run returned: done, or stopped in time (it raises when it fails)."""
    return "stopped" if status == "stopped" else "done"


def eval_stage(run_dir: str, generation: int) -> int:
    """Evaluate a trained generation (submitit pickles this function for the SLURM job). Raises when an
    opponent could not be played, after the others were, so that the job ends FAILED with that line."""
    from ..evaluate.stage import evaluate_generation

    result = evaluate_generation(Path(run_dir), generation)
    if result.status == "failed":
        raise AzhpcError(f"evaluation of generation {generation}: " + "; ".join(result.errors))
    return 0


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
    ev = sub.add_parser("eval")
    ev.add_argument("run_dir")
    ev.add_argument("generation", type=int)
    im = sub.add_parser("import")
    im.add_argument("run_dir")
    im.add_argument("task", type=int)
    ini = sub.add_parser("init", help="write the run's config.yaml and generation 0's network (idempotent)")
    ini.add_argument("run_dir")
    ini.add_argument("--config", default=None)
    ini.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        if args.stage == "init":
            from ..net.checkpoint import ensure_initial_checkpoint  # here: search workers import this module, never torch

            paths = RunPaths(check_run_root(Path(args.run_dir)))
            cfg = resolve_run_config(paths, args.config, args.overrides)
            ensure_initial_checkpoint(paths.model(0), cfg.model, cfg.run.seed)
            print(f"{paths.root}: config.yaml and {paths.model(0)} ready", flush=True)
        elif args.stage == "eval":
            return eval_stage(args.run_dir, args.generation)
        elif args.stage == "import":
            preempt.Stop.install(signal.SIGUSR2)
            result = import_stage(args.run_dir, args.task)
            print(result, flush=True)
            return preempt.EXIT_REQUEUE if result.status == "stopped" else 0
        elif args.stage == "selfplay":
            preempt.Stop.install(signal.SIGUSR2)  # stop, keep complete shards, requeue (SIGTERM: SLURM is ending the job)
            result = selfplay_stage(args.run_dir, args.generation, args.task, args.num_tasks)
            print(result, flush=True)
            return preempt.EXIT_REQUEUE if result.status == "stopped" else 0
        else:
            for s in (signal.SIGUSR2, signal.SIGTERM):  # the ranks save their state and stop
                signal.signal(s, forward_stop)
            result = train_stage(args.run_dir, args.generation, args.nproc_per_node)
            print(result, flush=True)
            return preempt.EXIT_REQUEUE if result.status == "stopped" else 0
    except (AzhpcError, OSError) as exc:
        return report(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
