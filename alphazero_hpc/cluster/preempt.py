"""Stopping in time: signals, the job's time limit, and asking SLURM to requeue the job.

SLURM warns a job before it ends: at the time limit (``--signal=USR2@N``: submitit asks for it, the sbatch
templates too), on preemption where the site sends it (``preempt_send_user_signal``), and with SIGTERM
before SIGKILL on ``scontrol requeue``, ``scancel`` and preemption everywhere else. A stage that hears one
stops at the next safe point (self-play: complete shards stay, training: its state is saved), exits with
``EXIT_REQUEUE``, and the job is requeued; the requeued job continues from what is on disk. SIGKILL needs
no help: every file is written atomically, so a killed stage loses only the work in flight.

The time limit is also read up front (``squeue -o %L``) so that a stage can stop *before* it: self-play
starts no shard it cannot finish, training saves its state ``slurm.stop_margin_s`` before the end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

from .procs import descendants
from .slurmenv import SlurmEnv

EXIT_REQUEUE = 75  # EX_TEMPFAIL: "stopped in time, state saved, run me again"


class Stop:
    """Process-wide stop request, set by a signal handler and polled at safe points."""

    reason = ""

    @classmethod
    def request(cls, signum: int, frame=None) -> None:  # noqa: ARG003 - signal handler signature
        if not cls.reason:
            cls.reason = f"signal {signal.Signals(signum).name}"

    @classmethod
    def install(cls, *signums: int) -> None:
        """Make ``signums`` (default USR2 and TERM) request a stop instead of killing the process."""
        for s in signums or (signal.SIGUSR2, signal.SIGTERM):
            signal.signal(s, cls.request)


def ignore_stop_signals() -> None:
    """For helper processes (DataLoader workers): SLURM signals every process of a step; only the
    process that owns the work reacts, helpers keep serving it until it exits."""
    for s in (signal.SIGUSR2, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


def work_finished() -> None:
    """A stage whose work is done and recorded ignores USR2 from now on. The time limit's warning can land between
    the stage's return and the process's exit (a slice that finishes just as it ends, seen under load); submitit's
    handler would then ask for a requeue, or at interpreter exit, where Python gives its handlers back to the
    default action, the signal kills the process and SLURM records the finished job as FAILED."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def parse_time_left(text: str) -> float | None:
    """Seconds from squeue's ``%L`` (``1-02:03:04``, ``02:03:04``, ``03:04``); None for UNLIMITED/NOT_SET."""
    m = _TIME.match(text.strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(x) if x else 0 for x in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def slurm_job_id() -> str:
    """This job's id as scontrol wants it: ``ARRAY_TASK`` for an array element, else the job id; '' outside SLURM."""
    return SlurmEnv.now().job_key


class Deadline:
    """When this SLURM job will be stopped, on the monotonic clock (the wall clock of a VM may jump)."""

    def __init__(self, seconds_left: float | None) -> None:
        self.end = None if seconds_left is None else time.monotonic() + seconds_left

    @classmethod
    def of_this_job(cls) -> "Deadline":
        job = SlurmEnv.now().job_id
        if not job or shutil.which("squeue") is None:
            return cls(None)
        try:
            out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return cls(None)
        return cls(parse_time_left(out.splitlines()[0]) if out.strip() else None)

    def remaining(self) -> float:
        return float("inf") if self.end is None else self.end - time.monotonic()


def requeue_this_job() -> str:
    """Ask SLURM to requeue the job this process runs in (it is then killed and started again).
    Returns '' on success, else why it could not."""
    job = slurm_job_id()
    if not job:
        return "not running inside a SLURM job"
    try:
        proc = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol requeue {job} failed: {exc}"
    return "" if proc.returncode == 0 else f"scontrol requeue {job} failed: {proc.stderr.strip() or proc.returncode}"


def signal_tree(pid: int, signum: int) -> None:
    """Send ``signum`` to ``pid`` and every process below it (those already gone are skipped)."""
    for p in [pid, *descendants(pid)]:
        try:
            os.kill(p, signum)
        except ProcessLookupError:
            pass
