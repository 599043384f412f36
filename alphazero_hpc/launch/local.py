"""The same pipeline on one machine: every stage a separate process, as an array task would be.

Self-play tasks run in parallel up to the plan's ``parallel`` (the GPUs, or the CPU cores), each pinned to
its own GPU through CUDA_VISIBLE_DEVICES and started fresh with exec (never a fork of a process that touched
CUDA); then training runs ``torchrun --standalone``. The supervisor is the only writer of launch.json and
records every stage process as a job (``local-<pid>``) with its exit status. Same rules as on SLURM: a
failed task does not stop training, the minimum-data rule does.

    python -m alphazero_hpc.launch.local RUN     what ``azhpc launch --cluster local`` starts in the background
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import RunDirError
from ..store.paths import RunPaths
from ..store.progress import task_done
from ..store.runconfig import read_run_config
from .record import SUPERVISOR_LOCK_FD, JobRecord, LaunchRecord, SupervisorLock, read_record, write_record

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .record import SupervisorRecord


@dataclass
class _Proc:
    job: JobRecord
    popen: subprocess.Popen
    slot: int


class LocalSupervisor:
    def __init__(self, run_dir: Path, on_tick: Callable[[], None] | None = None, tick_s: float = 2.0) -> None:
        self.paths = RunPaths(Path(run_dir))
        record = read_record(self.paths)
        if record is None:
            raise FileNotFoundError(f"{self.paths.launch_record} (not a launched run)")
        self.record: LaunchRecord = record
        self.on_tick, self.tick_s, self._last_tick = on_tick, tick_s, 0.0
        self.running: list[_Proc] = []
        self.evals: list[_Proc] = []  # evaluation processes: nothing waits for them but the end of the run
        cfg = read_run_config(self.paths)
        self.eval_enabled = cfg.eval.enabled
        self._stop = False
        self.max_attempts = int(record.supervisor.get("max_attempts") or cfg.slurm.max_attempts)

    def _save(self, **supervisor: Unpack[SupervisorRecord]) -> None:
        self.record.supervisor.update(supervisor)
        self.record.supervisor["updated"] = time.time()
        write_record(self.paths, self.record)

    def _tick(self) -> None:
        if self.on_tick and time.time() - self._last_tick >= self.tick_s:
            self._last_tick = time.time()
            self.on_tick()

    def _env(self, slot: int, threads: int) -> dict[str, str]:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HDF5_USE_FILE_LOCKING": "FALSE", "PYTHONUNBUFFERED": "1"}
        if self.record.plan.gpus_per_node:
            env["CUDA_VISIBLE_DEVICES"] = str(slot)
        return env

    def _start(self, generation: int, stage: str, args: list[str], tasks: list[int], slot: int, threads: int) -> _Proc:
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        name = (f"local-g{generation:04d}-{stage}" if generation >= 0 else "local-pretrain") + (f"-task{tasks[0]:04d}" if stage == "selfplay" else "")
        if stage == "eval":
            name = f"local-g{int(args[1]):04d}-eval"  # named after the generation it evaluates
        log = self.paths.stage_log(name)
        attempt = 1 + len([j for j in self.record.jobs_of(generation, stage) if j.tasks == tasks])
        with open(log, "ab") as fh:
            popen = subprocess.Popen([sys.executable, "-m", "alphazero_hpc.launch.stages", stage, *args], stdout=fh,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(slot, threads))
        job = JobRecord(generation, stage, f"local-{popen.pid}", tasks, attempt, state="running", log=str(log),
                        host=socket.gethostname())
        self.record.jobs.append(job)
        self._save()
        return _Proc(job, popen, slot)

    def _reap(self) -> None:
        for procs in (self.running, self.evals):
            for proc in list(procs):
                code = proc.popen.poll()
                if code is not None:
                    proc.job.exit_code = code
                    proc.job.state = "done" if code == 0 else "failed"
                    procs.remove(proc)
                    self._save()

    def _wait_all(self, evals: bool = False) -> None:
        while (self.running or (evals and self.evals)) and not self._stop:
            self._reap()
            self._tick()
            time.sleep(0.2)

    def _should_run(self, generation: int, task: int) -> bool:
        """Not done yet, and not failed max_attempts times already (a resume does not retry it forever)."""
        if task_done(self.paths.progress(generation, task)):
            return False
        return len(self.record.local_failures(generation, task)) < self.max_attempts

    def run_generation(self, generation: int) -> bool:
        plan, run = self.record.plan, str(self.paths.root)
        threads = max(1, (os.cpu_count() or 1) // plan.parallel)
        todo = [t for t in range(plan.tasks) if self._should_run(generation, t)]
        while (todo or self.running) and not self._stop:
            self._reap()
            while todo and len(self.running) < plan.parallel and not self._stop:
                free = min(set(range(plan.parallel)) - {p.slot for p in self.running})
                t = todo.pop(0)
                self.running.append(self._start(generation, "selfplay", [run, str(generation), str(t), str(plan.tasks)],
                                                [t, t + 1], free, threads))
            self._tick()
            time.sleep(0.2)
        if self._stop:
            return False
        train = self._start(generation, "train", [run, str(generation), f"--nproc-per-node={plan.ranks_per_node}"],
                            [0, 1], 0, max(1, (os.cpu_count() or 1) // plan.ranks_per_node))
        self.running.append(train)
        self._wait_all()
        if self._stop:
            return False
        if train.job.state == "done" and self.eval_enabled:  # one thread: it shares the cores with self-play
            self.evals.append(self._start(generation, "eval", [run, str(generation + 1)], [0, 1], 0, 1))
        return train.job.state == "done"

    def pretrain(self) -> bool:
        """Train generation 0's network on the imported games (``launch --pretrain``), as a training stage."""
        plan = self.record.plan
        train = self._start(-1, "train", [str(self.paths.root), "-1", f"--nproc-per-node={plan.ranks_per_node}"],
                            [0, 1], 0, max(1, (os.cpu_count() or 1) // plan.ranks_per_node))
        self.running.append(train)
        self._wait_all()
        return train.job.state == "done" and not self._stop

    def run(self) -> int:
        """Every generation whose checkpoint is missing; 0 when the last checkpoint exists. Raises RunDirError, and
        touches nothing, when another supervisor runs the run already."""
        lock = SupervisorLock(self.paths)
        lock.acquire()
        try:
            self.record = read_record(self.paths) or self.record  # as the supervisor before this one left it
            return self._run()
        finally:
            lock.release()

    def _run(self) -> int:
        self._save(pid=os.getpid(), host=socket.gethostname(), state="running", error="", started=time.time())
        before = {sig: signal.signal(sig, self._cancel) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.record.plan.pretrain and not self.paths.model(0).exists() and not self.pretrain():
                if self._stop:
                    self._save(state="cancelled", error="cancelled by a signal")
                    return 130
                self._save(state="failed", error=f"pretraining failed: see {self.record.jobs_of(-1, 'train')[-1].log}")
                return 1
            for g in range(self.record.plan.generations):
                if self.paths.model(g + 1).exists():
                    continue
                if not self.run_generation(g):
                    if self._stop:
                        self._save(state="cancelled", error="cancelled by a signal")
                        return 130
                    log = self.record.jobs_of(g, "train")[-1].log
                    self._save(state="failed", error=f"generation {g} training failed: see {log}")
                    return 1
            self._wait_all(evals=True)
            if self._stop:
                self._save(state="cancelled", error="cancelled by a signal")
                return 130
        finally:
            self._terminate_children()
            for sig, handler in before.items():  # a caller that runs the supervisor in-process (bench learning, then
                signal.signal(sig, handler)       # its evaluation) gets its own handling of TERM and INT back
        self._save(state="done")
        return 0

    def _cancel(self, signum, frame) -> None:  # noqa: ARG002
        # Only a flag: every loop polls it within 0.2 s and the ``finally`` of run() stops the children. Work
        # done inside the handler raced the main thread (Popen's waitpid lock held by a poll() it interrupted
        # made the handler's wait() hang, and the supervisor outlived azhpc cancel).
        self._stop = True

    def _terminate_children(self) -> None:
        for proc in self.running + self.evals:
            if proc.popen.poll() is None:
                proc.popen.terminate()
        deadline = time.time() + 20
        for proc in self.running + self.evals:
            try:
                proc.popen.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        self._reap()


def start_detached(run_dir: Path) -> int:
    """Start the supervisor in its own session (it outlives the terminal); returns its pid. The supervisor lock is
    taken here and handed to it, so that the run is locked from before the process exists (RunDirError when another
    supervisor holds it)."""
    paths = RunPaths(Path(run_dir))
    paths.logs.mkdir(parents=True, exist_ok=True)
    lock = SupervisorLock(paths)
    lock.acquire()
    try:
        env = {**os.environ, SUPERVISOR_LOCK_FD: str(lock.fileno())}
        with open(paths.supervisor_log, "ab") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "alphazero_hpc.launch.local", str(run_dir)], stdout=fh,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=(lock.fileno(),), env=env)
    except BaseException:
        lock.release()
        raise
    lock.name_holder(proc.pid)
    lock.hand_over()
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m alphazero_hpc.launch.local RUN", file=sys.stderr)
        return 2
    try:
        return LocalSupervisor(Path(argv[0])).run()
    except RunDirError as exc:  # another supervisor has the run: this one leaves it alone
        print(f"azhpc: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
