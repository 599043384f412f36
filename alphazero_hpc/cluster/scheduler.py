"""Job states from SLURM: squeue for live jobs, sacct for finished ones, each optional.

Without accounting sacct fails and a finished job simply disappears from squeue; callers then fall back
to what is on disk (progress files, shards, checkpoints). Array elements are keyed ``ARRAY_INDEX``.
"""

from __future__ import annotations

import getpass
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import AzhpcError

ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
          "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESV_DEL_HOLD", "STOPPED"}
FAILED = {"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "PREEMPTED"}


@dataclass(frozen=True)
class JobState:
    state: str  # SLURM's state name, e.g. PENDING, RUNNING, COMPLETED, FAILED
    reason: str = ""  # squeue's reason (Dependency, DependencyNeverSatisfied, ...) or sacct's exit code
    source: str = ""  # squeue or sacct

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def failed(self) -> bool:
        return self.state in FAILED


def run_quietly(cmd: list[str]) -> str | None:
    """A SLURM client's stdout; None when it is missing, fails or hangs for 30 s."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


class SchedulerSilent(AzhpcError):
    """squeue did not answer: nothing can be said about the jobs (not even that they ended)."""


def owner(path: Path) -> str:
    """Who most likely submitted a run's jobs where its records do not say (written before they did): the owner of
    its folder; this user where the folder's owner has no name here."""
    try:
        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (OSError, KeyError):
        return getpass.getuser()


def query(job_ids: list[str], user: str | None = None) -> dict[str, JobState]:
    """States of the given jobs and of their array elements; jobs SLURM no longer knows are absent. ``user``: who
    submitted them (``owner`` of the run folder; default this user), whose queue squeue lists. sacct may fail (no
    accounting); squeue must answer, or this raises ``SchedulerSilent``: a silent scheduler is no reason to think
    the jobs ended."""
    wanted = {j.split("_")[0] for j in job_ids if j and j[0].isdigit()}
    if not wanted:
        return {}
    states: dict[str, JobState] = {}
    out = run_quietly(["sacct", "-n", "-P", "-X", "-j", ",".join(sorted(wanted)), "-o", "JobID,State,ExitCode"])
    for line in (out or "").splitlines():
        parts = line.split("|")
        if len(parts) >= 3 and parts[0].split("_")[0] in wanted:
            # an array that never started is one row, ID_[0-3]: its state stands for every element
            key = parts[0].split("_")[0] if "[" in parts[0] else parts[0]
            states[key] = JobState(parts[1].split()[0] if parts[1] else "UNKNOWN", f"exit {parts[2]}", "sacct")
    out = run_quietly(["squeue", "-h", "-r", "-u", user or getpass.getuser(), "-o", "%i|%T|%r"])
    if out is None:
        raise SchedulerSilent("squeue did not answer (slurmctld down, or no SLURM commands on this host): the jobs' "
                              "states are unknown; run this on the cluster's login node, or retry when squeue works")
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) >= 3 and parts[0].split("_")[0] in wanted:
            states[parts[0]] = JobState(parts[1], "" if parts[2] in ("None", "(null)") else parts[2], "squeue")
    return states


def element_state(states: dict[str, JobState], job_id: str, index: int, array_size: int) -> JobState | None:
    """State of element ``index`` of array ``job_id``: its own row, else the array's (an array that never
    started, or a one-task array, which submitit submits as a plain job)."""
    return states.get(f"{job_id}_{index}") or states.get(job_id)


def first_node(nodelist: str) -> str:
    """The first host name of a SLURM node list (``n[1-2]`` -> ``n1``): where a rendezvous is hosted."""
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def cancel(job_ids: list[str]) -> bool:
    ids = [j for j in job_ids if j and j[0].isdigit()]
    return not ids or run_quietly(["scancel", *ids]) is not None
