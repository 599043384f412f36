"""How many jobs the site lets this user have queued at once, and how many they have now.

A site caps the job records a user may have in the queue (``MaxSubmitJobs`` on the user's association or QOS,
``GrpSubmitJobs`` on the account, ``MaxJobCount`` for the whole cluster); every element of a job array counts as
one record. ``sbatch`` refuses the job that would cross the cap, so a chain of generations must be submitted a
window at a time (``launch.window``). The cap is read from ``sacctmgr`` and ``scontrol show config`` where they
answer; ``slurm.max_submit_jobs`` sets it where they do not (or lowers it).

Each cap counts its own records: a user's association the user's jobs in that account, an account's GrpSubmitJobs
every user's jobs in it, a QOS's MaxSubmitJobsPerUser the user's jobs under it and its GrpSubmitJobs everyone's
(MaxJobCount counts every job of the cluster, but only the user's own are listed for it: see
``read_submit_limits``). ``queued_records(limit)`` counts in the limit's scope, and the room left is the
least over all caps (``room``): jobs under another account do not shrink the room an association leaves, and other
users' jobs and sub-accounts' jobs do shrink an account's (whose cap, and every ancestor's, the jobs of a
sub-account meet). Each count is the higher of squeue's listing and the controller's own (``controller_count``),
which is what sbatch checks for the association, account and QOS caps.
"""

from __future__ import annotations

import getpass
import os
import pwd
import re
from dataclasses import dataclass

from .scheduler import run_quietly


@dataclass(frozen=True)
class SubmitLimit:
    """The most job records (array elements count one each) that may be queued in one scope, and where that was
    read. The scope: ``user`` (only that user's records; '' for every user's), ``account`` and ``qos`` ('' for any)."""

    jobs: int | None  # None: no limit found
    source: str  # e.g. "MaxSubmitJobs=20 of user alice's association in account physics (sacctmgr)"
    user: str = ""
    account: str = ""
    qos: str = ""

    def __str__(self) -> str:
        return self.source if self.jobs is not None else "no submit limit found"

    def squeue_scope(self) -> list[str]:
        """squeue's options that select the records this limit counts."""
        return [*(["-u", self.user] if self.user else []), *(["-A", self.account] if self.account else []),
                *(["-q", self.qos] if self.qos else [])]

    def assoc_mgr_query(self) -> list[str]:
        """``scontrol show assoc_mgr``'s options whose count is the controller's for this limit ([]: none)."""
        if self.qos:
            return [f"qos={self.qos}", "flags=qos"]
        if self.user:
            return [f"users={self.user}", "flags=assoc"]
        return [f"accounts={self.account}", "flags=assoc"] if self.account else []


def lowest(limits: list[SubmitLimit]) -> SubmitLimit:
    """The lowest cap of ``limits`` (what no window can exceed), or no limit."""
    capped = [limit for limit in limits if limit.jobs is not None]
    return min(capped, key=lambda limit: limit.jobs or 0) if capped else SubmitLimit(None, "")


def read_submit_limit(configured: int = 0, user: str | None = None, account: str = "", qos: str = "") -> SubmitLimit:
    """The lowest cap of ``read_submit_limits`` (what a refusal message names), or no limit."""
    return lowest(read_submit_limits(configured, user, account, qos))


def read_submit_limits(configured: int = 0, user: str | None = None, account: str = "",
                       qos: str = "") -> list[SubmitLimit]:
    """Every cap the jobs meet, each with its scope: ``configured`` (``slurm.max_submit_jobs``, > 0, over all the
    user's records); MaxSubmitJobs and GrpSubmitJobs of the user's association in the account the jobs go to
    (``account``, else the user's default account; every association of the user when neither is known) and
    GrpSubmitJobs of that account and of each account above it; MaxSubmitJobsPerUser and GrpSubmitJobs of the QOS the
    jobs run under (``qos``, else the association's default QOS, else every QOS it allows); the cluster's MaxJobCount."""
    user = user or getpass.getuser()
    found: list[SubmitLimit] = []
    if configured > 0:
        found.append(SubmitLimit(configured, f"slurm.max_submit_jobs={configured}", user=user))
    config = run_quietly(["scontrol", "show", "config"])
    settings = dict((k.strip(), v.strip()) for k, _, v in (line.partition("=") for line in (config or "").splitlines()))
    where = [f"cluster={settings['ClusterName']}"] if settings.get("ClusterName") else []  # one accounting database may serve several
    account = account or _default_account(user)
    rows = [line.split("|")[:5] for line in (run_quietly(["sacctmgr", "-nP", "show", "assoc", "where", f"user={user}",
            *where, "format=Account,MaxSubmit,GrpSubmit,QOS,DefaultQOS"]) or "").splitlines()]
    rows = [r for r in rows if len(r) == 5]
    known = [r for r in rows if r[0] == account]
    mine = known or rows  # an unknown account: the tightest of them all, but only the caps on the user's own jobs
    qos_names: set[str] = {q for q in qos.split(",") if q}
    for acct, max_submit, grp_submit, allowed, default_qos in mine:
        for value, what in ((max_submit, "MaxSubmitJobs"), (grp_submit, "GrpSubmitJobs")):
            if value.isdigit():
                found.append(SubmitLimit(int(value), f"{what}={value} of user {user}'s association in account {acct} "
                                                     "(sacctmgr)", user=user, account=acct))
        if not qos:
            qos_names |= {default_qos} if default_qos else {q for q in allowed.split(",") if q}
    # A group cap counts other users' jobs too: it is read only where the jobs are known to go (the account, the QOS),
    # or a full QOS the jobs never use would leave no room. Where they are not known, the caps on the user's own jobs.
    qos_known = bool(qos) or all(r[4] for r in mine)
    for charged in sorted({r[0] for r in known if r[0]}):  # the account's own row (no user) and its parents' up to
        acct, seen = charged, set()                       # the root: sbatch checks each one's GrpSubmitJobs
        while acct and acct not in seen:
            seen.add(acct)
            out = run_quietly(["sacctmgr", "-nP", "show", "assoc", "where", f"account={acct}", *where,
                               "format=User,GrpSubmit,ParentName"])
            rows = [line.split("|") + ["", ""] for line in (out or "").splitlines()]
            grp, parent = next((row[1:3] for row in rows if row[0] == ""), ("", ""))
            if grp.isdigit():
                above = f" (the parent of {charged}'s)" if acct != charged else ""
                found.append(SubmitLimit(int(grp), f"GrpSubmitJobs={grp} of account {acct}{above} (sacctmgr)", account=acct))
            acct = parent
    if qos_names:
        out = run_quietly(["sacctmgr", "-nP", "show", "qos", "where", f"name={','.join(sorted(qos_names))}",
                           "format=Name,MaxSubmitPU,GrpSubmit"])
        for line in (out or "").splitlines():
            name, *limits = (line.split("|") + ["", ""])[:3]
            for value, what, who in zip(limits, ("MaxSubmitJobsPerUser", "GrpSubmitJobs"), (user, "")):
                if value.isdigit() and (who or qos_known):
                    found.append(SubmitLimit(int(value), f"{what}={value} of QOS {name} (sacctmgr)", user=who, qos=name))
    if settings.get("MaxJobCount", "").isdigit():  # every job of the cluster counts, finished ones kept for MinJobAge
        # too, which squeue does not list; listing the whole queue at every poll of every extension would load the
        # controller, so only the user's own records are counted here, and sbatch's refusal is the backstop
        found.append(SubmitLimit(int(settings["MaxJobCount"]),
                                 f"MaxJobCount={settings['MaxJobCount']} of the cluster (scontrol show config)", user=user))
    return found


def _default_account(user: str) -> str:
    """The account sbatch charges when none is given (the user's DefaultAccount); '' when sacctmgr does not say."""
    out = run_quietly(["sacctmgr", "-nP", "show", "user", user, "format=DefaultAccount"])
    return (out or "").strip().splitlines()[0] if (out or "").strip() else ""


def queued_records(limit: SubmitLimit | None = None, user: str | None = None) -> int:
    """Job records that count against ``limit`` now (its scope; None: every record of ``user``): the higher of
    squeue's count (each array element one, pending ones included) and the controller's (``controller_count``),
    which sbatch checks, which can lag behind a job that has just ended and which also counts what squeue does not
    list in the scope (a sub-account's jobs against its parent's GrpSubmitJobs, other users' jobs that PrivateData
    hides); 0 when neither answers (sbatch then says what the site thinks)."""
    limit = limit or SubmitLimit(None, "", user=user or getpass.getuser())
    out = run_quietly(["squeue", "-h", "-r", "-a", *limit.squeue_scope(), "-o", "%i"])  # -a: hidden partitions' jobs count too
    listed = len([line for line in (out or "").splitlines() if line.strip()])
    return max(listed, controller_count(limit) or 0)


def room(limits: list[SubmitLimit]) -> tuple[int, SubmitLimit, int] | None:
    """The least room any of ``limits`` leaves now: (records that still fit, that limit, records it counts), or
    None without a limit."""
    rooms = [(limit.jobs - queued, limit, queued) for limit in limits if limit.jobs is not None
             for queued in [queued_records(limit)]]
    return min(rooms, key=lambda r: r[0]) if rooms else None


def controller_count(limit: SubmitLimit) -> int | None:
    """The controller's count of the records ``limit`` counts (``scontrol show assoc_mgr``, its ``assoc_mgr_query``),
    None where it does not say (an older Slurm, PrivateData=usage hiding it, no such association or QOS)."""
    query = limit.assoc_mgr_query()
    lines = (run_quietly(["scontrol", "-o", "show", "assoc_mgr", *query]) or "").splitlines() if query else []
    if limit.qos:
        return _qos_count(lines, limit.qos, limit.user)
    return _users_count(lines, limit.user, limit.account) if limit.user else _account_count(lines, limit.account)


def controller_records(user: str, account: str = "") -> int | None:
    """The controller's count of ``user``'s submitted job records (in ``account`` when it is given): what
    MaxSubmitJobs is checked against. Slurm 22.05.8 was seen to keep counting a job after requeues
    (docs/pipeline.md, "Under a submit limit"); squeue then shows fewer records than sbatch counts."""
    return controller_count(SubmitLimit(None, "", user=user, account=account))


def _users_count(lines: list[str], user: str, account: str) -> int | None:
    """``GrpSubmitJobs=limit(count)`` of the user's associations (those in ``account`` when it is given), summed."""
    found = [m for line in lines if re.search(rf"\bUserName={re.escape(user)}\(", line)
             and (not account or re.search(rf"\bAccount={re.escape(account)}(?=\s|$)", line))
             for m in [_GRP_SUBMIT.search(line)] if m]
    counts = [_count(m) for m in found]
    return None if not counts or None in counts else sum(c for c in counts if c is not None)


def _account_count(lines: list[str], account: str) -> int | None:
    """The count of the records charged to ``account`` and its sub-accounts, every user's: the ``GrpSubmitJobs``
    count of the account's own association (the row without a user)."""
    row = next((line for line in lines if re.search(rf"\bAccount={re.escape(account)}\s", line)
                and re.search(r"\bUserName=(\s|$)", line)), "")
    return _count(_GRP_SUBMIT.search(row))


def _qos_count(lines: list[str], qos: str, user: str) -> int | None:
    """The count of the records under ``qos``: every user's (its ``GrpSubmitJobs`` count), or ``user``'s alone
    (``MaxSubmitJobsPU`` under the QOS's "User Limits", keyed by uid)."""
    line = next((line for line in lines if re.match(rf"QOS={re.escape(qos)}\(", line)), "")
    if not user:
        return _count(_GRP_SUBMIT.search(line))
    uid = _uid(user)
    return _count(re.search(rf"\b{uid}=\{{[^}}]*\bMaxSubmitJobsPU=[^(\s]*\((\d+)\)", line)) if uid is not None else None


_GRP_SUBMIT = re.compile(r"\bGrpSubmitJobs=[^(\s]*\((\d+)\)")


def _count(m: re.Match | None) -> int | None:
    """A count the controller printed, None past 2**31: Slurm 22.05 subtracts a finished array's records without a
    floor, and a count it had leaked low wraps to ~4e9 (a reading that would stop every chain while sbatch takes jobs)."""
    return int(m.group(1)) if m and int(m.group(1)) < 2**31 else None


def _uid(user: str) -> int | None:
    """``user``'s uid: this process's own when it runs as that user (no passwd lookup on a compute node), else passwd's."""
    if user == getpass.getuser():
        return os.getuid()
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def is_submit_limit(message: str) -> bool:
    """Whether sbatch's refusal was a submit limit (association, QOS or the cluster's job count)."""
    return any(k in message for k in ("MaxSubmitJob", "AssocGrpSubmitJobs", "QOSGrpSubmitJob", "QOSMaxSubmitJob",
                                      "job submit limit", "MaxJobCount"))
