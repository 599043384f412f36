"""How many jobs the site lets this user have queued at once, and how many they have now.

A site caps the job records a user may have in the queue (``MaxSubmitJobs`` on the user's association or QOS,
``GrpSubmitJobs`` on the account, ``MaxJobCount`` for the whole cluster); every element of a job array counts as
one record. ``sbatch`` refuses the job that would cross the cap, so a chain of generations must be submitted a
window at a time (``launch.window``). The cap is read from ``sacctmgr`` and ``scontrol show config`` where they
answer; ``slurm.max_submit_jobs`` sets it where they do not (or lowers it).
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass

from .scheduler import run_quietly


@dataclass(frozen=True)
class SubmitLimit:
    """The most job records (array elements count one each) this user may have queued, and where that was read."""

    jobs: int | None  # None: no limit found
    source: str  # e.g. "MaxSubmitJobs=20 of user alice's association"

    def __str__(self) -> str:
        return self.source if self.jobs is not None else "no submit limit found"


def _tightest(found: list[tuple[int, str]]) -> SubmitLimit:
    if not found:
        return SubmitLimit(None, "")
    jobs, source = min(found)
    return SubmitLimit(jobs, source)


def read_submit_limit(configured: int = 0, user: str | None = None, account: str = "", qos: str = "") -> SubmitLimit:
    """The tightest of: ``configured`` (``slurm.max_submit_jobs``, > 0); MaxSubmitJobs of the user's association in
    the account the jobs go to (``account``, else the user's default account; every association of the user when
    neither is known) and GrpSubmitJobs of that account; MaxSubmitJobsPerUser and GrpSubmitJobs of the QOS the jobs
    run under (``qos``, else the association's default QOS, else every QOS it allows); the cluster's MaxJobCount."""
    user = user or getpass.getuser()
    found: list[tuple[int, str]] = []
    if configured > 0:
        found.append((configured, f"slurm.max_submit_jobs={configured}"))
    config = run_quietly(["scontrol", "show", "config"])
    settings = dict((k.strip(), v.strip()) for k, _, v in (line.partition("=") for line in (config or "").splitlines()))
    where = [f"cluster={settings['ClusterName']}"] if settings.get("ClusterName") else []  # one accounting database may serve several
    account = account or _default_account(user)
    rows = [line.split("|")[:5] for line in (run_quietly(["sacctmgr", "-nP", "show", "assoc", "where", f"user={user}",
            *where, "format=Account,MaxSubmit,GrpSubmit,QOS,DefaultQOS"]) or "").splitlines()]
    rows = [r for r in rows if len(r) == 5]
    mine = [r for r in rows if r[0] == account] or rows  # an unknown account: the tightest of them all
    qos_names: set[str] = {q for q in qos.split(",") if q}
    for acct, max_submit, grp_submit, allowed, default_qos in mine:
        if max_submit.isdigit():
            found.append((int(max_submit), f"MaxSubmitJobs={max_submit} of user {user}'s association in account {acct} (sacctmgr)"))
        if grp_submit.isdigit():
            found.append((int(grp_submit), f"GrpSubmitJobs={grp_submit} of user {user}'s association in account {acct} (sacctmgr)"))
        if not qos:
            qos_names |= {default_qos} if default_qos else {q for q in allowed.split(",") if q}
    for acct in sorted({r[0] for r in mine if r[0]}):  # the account's own row (no user): its GrpSubmitJobs
        out = run_quietly(["sacctmgr", "-nP", "show", "assoc", "where", f"account={acct}", *where, "format=User,GrpSubmit"])
        for line in (out or "").splitlines():
            who, _, grp = line.partition("|")
            if not who and grp.isdigit():
                found.append((int(grp), f"GrpSubmitJobs={grp} of account {acct} (sacctmgr)"))
    if qos_names:
        out = run_quietly(["sacctmgr", "-nP", "show", "qos", "where", f"name={','.join(sorted(qos_names))}",
                           "format=Name,MaxSubmitPU,GrpSubmit"])
        for line in (out or "").splitlines():
            name, *limits = (line.split("|") + ["", ""])[:3]
            for value, what in zip(limits, ("MaxSubmitJobsPerUser", "GrpSubmitJobs")):
                if value.isdigit():
                    found.append((int(value), f"{what}={value} of QOS {name} (sacctmgr)"))
    if settings.get("MaxJobCount", "").isdigit():
        found.append((int(settings["MaxJobCount"]), f"MaxJobCount={settings['MaxJobCount']} of the cluster (scontrol show config)"))
    return _tightest(found)


def _default_account(user: str) -> str:
    """The account sbatch charges when none is given (the user's DefaultAccount); '' when sacctmgr does not say."""
    out = run_quietly(["sacctmgr", "-nP", "show", "user", user, "format=DefaultAccount"])
    return (out or "").strip().splitlines()[0] if (out or "").strip() else ""


def queued_records(user: str | None = None) -> int:
    """Job records of ``user`` that count against a submit limit now: the higher of squeue's (each array element
    one, pending ones included) and the controller's own count (``controller_records``), which sbatch checks and
    which can lag behind a job that has just ended; 0 when neither answers (sbatch then says what the site thinks)."""
    user = user or getpass.getuser()
    out = run_quietly(["squeue", "-h", "-r", "-u", user, "-o", "%i"])
    listed = len([line for line in (out or "").splitlines() if line.strip()])
    return max(listed, controller_records(user) or 0)


def controller_records(user: str) -> int | None:
    """The controller's count of ``user``'s submitted job records (``GrpSubmitJobs=limit(count)`` of the user's
    associations in ``scontrol show assoc_mgr``: what MaxSubmitJobs is checked against), None where it does not say
    (an older Slurm, or PrivateData hiding it). Slurm 22.05.8 was seen to keep counting a job after requeues
    (docs/pipeline.md, "Under a submit limit"); squeue then shows fewer records than sbatch counts."""
    out = run_quietly(["scontrol", "-o", "show", "assoc_mgr", f"users={user}", "flags=assoc"])
    counts = [int(m.group(1)) for line in (out or "").splitlines() if re.search(rf"\bUserName={re.escape(user)}\(", line)
              for m in [re.search(r"\bGrpSubmitJobs=[^(\s]*\((\d+)\)", line)] if m]
    return max(counts) if counts else None


def is_submit_limit(message: str) -> bool:
    """Whether sbatch's refusal was a submit limit (association, QOS or the cluster's job count)."""
    return any(k in message for k in ("MaxSubmitJob", "AssocGrpSubmitJobs", "QOSGrpSubmitJob", "QOSMaxSubmitJob",
                                      "job submit limit", "MaxJobCount"))
