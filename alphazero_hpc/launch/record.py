"""``RUN/launch.json``: how the run was launched and every job of every generation and stage.

One writer at a time (the ``azhpc launch`` process, or the local supervisor), every write atomic, so a
reader (``azhpc status``) never sees half a file. With config.yaml, the progress files and the shards'
sidecars, it is all one needs to understand a run::

    {"schema_version": 1, "created": 1700000000.0, "command": "azhpc launch ...",
     "plan": {"cluster": "slurm", "generations": 2, "tasks": 4, "nodes": 2, "gpus_per_node": 2, ...},
     "jobs": [{"generation": 0, "stage": "selfplay", "job_id": "17", "tasks": [0, 4], "attempt": 1,
               "dependency": "", "submitted": 1700000001.0, "state": "", "exit_code": null}, ...],
     "supervisor": {"pid": 1234, "host": "vm", "state": "running", "error": ""}}      (local runs only)

``tasks`` is [first, end) of the array elements, unless ``indices`` lists them (an array that ``azhpc resume``
submitted for some tasks only: element i runs task indices[i]); a job id of a local stage is ``local-<pid>``.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Literal, TypedDict

from ..cluster import procs, scheduler
from ..store import atomic
from ..errors import RunDirError, no_locks
from ..store.paths import RunPaths
from .plan import LaunchPlan

RECORD_SCHEMA = 1


# A local stage process, as the supervisor records it: running, done (exit 0), failed (another exit), cancelled
# (azhpc cancel stopped it), stopped (its supervisor was gone and resume stopped it); "" for a SLURM job.
LocalJobState = Literal["", "running", "done", "failed", "cancelled", "stopped"]


@dataclass
class JobRecord:
    generation: int
    stage: str  # selfplay, train, or eval (of the network this generation's training wrote)
    job_id: str
    tasks: list[int] = field(default_factory=lambda: [0, 1])  # [first, end) for self-play arrays
    attempt: int = 1  # submissions of this generation and stage so far
    dependency: str = ""
    submitted: float = field(default_factory=time.time)
    state: LocalJobState = ""  # SLURM runs ask the scheduler (SLURM's state names); local runs record it here
    exit_code: int | None = None
    log: str = ""
    indices: list[int] = field(default_factory=list)  # element i runs task indices[i]; empty: tasks[0] + i
    host: str = ""  # local stages: the machine the process runs on (its pid means nothing elsewhere)

    def task_ids(self) -> list[int]:
        return list(self.indices) if self.indices else list(range(self.tasks[0], self.tasks[1]))

    def element(self, task: int) -> int:
        """The array index that runs ``task``."""
        return self.indices.index(task) if self.indices else task - self.tasks[0]

    @property
    def size(self) -> int:
        return len(self.indices) if self.indices else self.tasks[1] - self.tasks[0]

    def element_id(self, task: int) -> str:
        """The scheduler's id of the element that runs ``task`` (``ARRAY_INDEX``, or the job id of a one-task job)."""
        return f"{self.job_id}_{self.element(task)}" if self.size > 1 else self.job_id

    @property
    def local_pid(self) -> int:
        """The process id of a local stage (job id ``local-<pid>``); 0 for a SLURM job."""
        return int(self.job_id[len("local-"):]) if self.job_id.startswith("local-") else 0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (0 or less: no process)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ElsewhereError(RunDirError):
    """The process is on another machine: nothing about it can be checked or signalled from here."""


def azhpc_process_alive(pid: int, host: str) -> bool:
    """Whether ``pid`` is a live azhpc process (supervisor or stage, or the ``azhpc`` command running a supervisor
    in the foreground) of this run's machine. A pid recorded on
    another host raises ``ElsewhereError``; a pid reused by an unrelated process since is not alive for us."""
    here = socket.gethostname()
    if host and host != here:
        raise ElsewhereError(f"the run's local processes were started on {host}, this is {here}: run this command on "
                             f"{host} (a pid means nothing on another machine)")
    if not pid_alive(pid):
        return False
    command = procs.cmdline(pid)
    if command is None:
        return True  # no /proc: trust the pid
    if not command:  # one on its way out (its memory released, or a zombie not yet reaped) has none, as a kernel
        return not procs.kernel_thread(pid)  # thread has: the first is still ours until reaped, the second never was
    return b"alphazero_hpc" in command or any(os.path.basename(a) == b"azhpc" for a in command.split(b"\0")[:2])



# What the local supervisor is doing (a SLURM run has none: its jobs chain themselves):
#   running    playing and training the run's stages
#   resuming   azhpc resume has handed the run to a new supervisor, which has not started yet
#   done       every generation trained (and evaluated, if eval is enabled)
#   failed     a stage failed more than slurm.max_attempts times, or a training failed; ``error`` says which
#   cancelled  stopped by azhpc cancel or a signal
#   lost       (azhpc status only) the recorded state is running but the process is gone
SupervisorState = Literal["running", "resuming", "done", "failed", "cancelled", "lost"]


class SupervisorRecord(TypedDict, total=False):
    """The launch record's ``supervisor`` entry (local runs only)."""

    pid: int
    host: str
    state: SupervisorState
    error: str  # failed, cancelled, lost: why, in one line
    started: float  # time.time()
    updated: float
    max_attempts: int  # set by azhpc resume --max-attempts: overrides slurm.max_attempts for this supervisor


@dataclass
class LaunchRecord:
    plan: LaunchPlan
    command: str = ""
    created: float = field(default_factory=time.time)
    jobs: list[JobRecord] = field(default_factory=list)
    supervisor: SupervisorRecord = field(default_factory=SupervisorRecord)
    events: list[dict[str, Any]] = field(default_factory=list)  # e.g. {"time": ..., "event": "cancel", "jobs": [...]}
    schema_version: int = RECORD_SCHEMA
    user: str = field(default_factory=getpass.getuser)  # who submitted the jobs: whose queue squeue is asked for

    def jobs_of(self, generation: int, stage: str) -> list[JobRecord]:
        return [j for j in self.jobs if j.generation == generation and j.stage == stage]

    def local_failures(self, generation: int, task: int) -> list[JobRecord]:
        """The local self-play processes of a task that exited with an error."""
        return [j for j in self.jobs_of(generation, "selfplay") if j.tasks == [task, task + 1] and j.state == "failed"]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["plan"] = self.plan.to_json()
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LaunchRecord":
        return cls(plan=LaunchPlan.from_json(data["plan"]), command=data.get("command", ""), created=data.get("created", 0.0),
                   jobs=[JobRecord(**j) for j in data.get("jobs", [])], supervisor=SupervisorRecord(**data.get("supervisor", {})), events=data.get("events", []),
                   schema_version=data.get("schema_version", RECORD_SCHEMA), user=data.get("user", ""))


def _holder_line(fh: Any) -> str:
    """What a held lock file says of its holder, which writes it right after taking the lock ("" if not yet)."""
    for _ in range(20):
        fh.seek(0)
        line = fh.read().strip()
        if line:
            return line
        time.sleep(0.025)
    return ""


@contextlib.contextmanager
def record_lock(paths: RunPaths, holder: str = "azhpc") -> Iterator[None]:
    """One launch, resume or cancel of a run at a time (an flock on RUN/.launch.lock; released if the holder dies).
    The lock file names its holder (``holder``, pid, host), so the one refused can say who has the run."""
    if not paths.root.is_dir():
        raise RunDirError(f"{paths.root} is not a run folder (it does not exist): check the path")
    with open(paths.launch_lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder_line(fh) or "another azhpc launch, resume or cancel"
            raise RunDirError(f"{paths.root} is in use by {who}: wait for it to finish") from None
        except OSError as exc:
            raise no_locks(paths.launch_lock, exc) from exc
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{holder} (pid {os.getpid()} on {socket.gethostname()})\n")
            fh.flush()
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


SUPERVISOR_LOCK_FD = "AZHPC_SUPERVISOR_LOCK_FD"  # a supervisor started detached inherits its lock, held already


class SupervisorLock:
    """The local supervisor's flock on RUN/.supervisor.lock, held for its whole life and released by the kernel when
    it dies however it dies: a second supervisor of the run (two resumes, a resume while a just-started supervisor
    has not written itself into the record yet) is refused instead of playing the same tasks beside the first. The
    lock file names its holder's pid and host, so that resume and cancel find a supervisor the record does not name.
    ``start_detached`` takes the lock before it starts the process and hands it over (an inherited descriptor: the
    lock belongs to the open file, not to the process), so no moment of the new supervisor's start is unlocked."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._fh: Any = None

    def fileno(self) -> int:
        return self._fh.fileno()

    def acquire(self) -> None:
        """Take the lock, or adopt the one a starter handed over; RunDirError when another supervisor holds it."""
        inherited = os.environ.pop(SUPERVISOR_LOCK_FD, "")
        with contextlib.suppress(OSError):
            if inherited.isdigit() and os.path.samestat(os.fstat(int(inherited)), os.stat(self.paths.supervisor_lock)):
                fh = os.fdopen(int(inherited), "a+")
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already: the same open file
                self._fh = fh
                self.name_holder(os.getpid())
                return
        fh = open(self.paths.supervisor_lock, "a+")
        for attempt in range(20):  # a resume or cancel looking for a holder takes the lock shared for a moment
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt < 19:
                    time.sleep(0.05)
                    continue
                fh.close()
                pid, host = supervisor_holder(self.paths)
                raise RunDirError(f"{self.paths.root} is already run by a local supervisor (pid {pid or '?'} on "
                                  f"{host or '?'}): azhpc status {self.paths.root} follows it, azhpc cancel stops it") from None
            except OSError as exc:
                fh.close()
                raise no_locks(self.paths.supervisor_lock, exc) from exc
        self._fh = fh
        self.name_holder(os.getpid())

    def name_holder(self, pid: int) -> None:
        try:
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.write(f"{pid} {socket.gethostname()}\n")
            self._fh.flush()
        except OSError:  # a full disk: the lock holds all the same; a probe reads the pid as unknown (-1)
            pass

    def hand_over(self) -> None:
        """Close this process's descriptor and keep the lock: the started supervisor holds it through its own."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def release(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.seek(0)
                self._fh.truncate()  # no stale holder for a probe to read
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def supervisor_holder(paths: RunPaths) -> tuple[int, str]:
    """(pid, host) of the live supervisor that holds the run's supervisor lock, else (0, ""); the pid is -1 for one
    that holds it but has not written its pid yet."""
    try:
        fh = open(paths.supervisor_lock)
    except OSError:
        return 0, ""
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fh, fcntl.LOCK_UN)
            return 0, ""
        except BlockingIOError:
            pass
        except OSError:
            return 0, ""  # no flock here: no supervisor could have taken it either
        fields = _holder_line(fh).split()
        return (int(fields[0]), fields[1]) if len(fields) == 2 and fields[0].isdigit() else (-1, "")


def wait_gone(pid: int, host: str, timeout_s: float = 10.0) -> None:
    """After a SIGKILL: wait until the process is reaped, so that a caller that returns leaves nothing behind."""
    deadline = time.time() + timeout_s
    while azhpc_process_alive(pid, host) and time.time() < deadline:
        time.sleep(0.05)


STAGE_MODULE = b"alphazero_hpc.launch.stages"
SUPERVISED_STAGES = (b"selfplay", b"train", b"eval")  # what the local supervisor starts (import-pgn's run on their own)


def unrecorded_stages(paths: RunPaths, record: LaunchRecord) -> list[int]:
    """Live stage processes of this run on this machine that the record does not name: a supervisor killed between
    starting a stage (``python -m alphazero_hpc.launch.stages STAGE RUN_DIR ...``) and recording its pid leaves one
    that nothing else would stop, and it would play beside its next attempt."""
    known = {j.local_pid for j in record.jobs if j.local_pid}
    root = os.path.realpath(paths.root)
    found = []
    for pid in procs.pids():
        command = procs.cmdline(pid)
        argv = (command or b"").split(b"\0")
        if pid in known or STAGE_MODULE not in argv:
            continue
        i = argv.index(STAGE_MODULE)
        if i + 2 >= len(argv) or argv[i + 1] not in SUPERVISED_STAGES:
            continue
        run_dir, cwd = os.fsdecode(argv[i + 2]), procs.cwd(pid)
        if not os.path.isabs(run_dir) and cwd is None:
            continue  # relative to a folder we cannot see (another user's process)
        if os.path.realpath(os.path.join(cwd or "", run_dir)) == root:
            found.append(pid)
    return found


def _signal(pid: int, signum: int) -> bool:
    """Send ``signum``; False for a process gone or not ours to signal."""
    try:
        os.kill(pid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_processes(pids: list[int], timeout_s: float) -> list[int]:
    """SIGTERM, then SIGKILL for those still running after ``timeout_s``; returns, when all are gone, those that
    could be signalled."""
    pids = [p for p in pids if _signal(p, signal.SIGTERM)]
    deadline = time.time() + timeout_s
    for pid in pids:
        while azhpc_process_alive(pid, "") and time.time() < deadline:
            time.sleep(0.1)
        if azhpc_process_alive(pid, "") and _signal(pid, signal.SIGKILL):
            wait_gone(pid, "")
    return pids


def stop_orphans(paths: RunPaths, record: LaunchRecord, timeout_s: float = 30.0) -> list[str]:
    """Stop the stage processes of a supervisor that is gone (SIGKILLed: its children run on), the recorded ones
    and any it started without recording (``unrecorded_stages``). SIGTERM: a training stage saves its state and
    stops, a self-play stage ends at once (its complete shards stay); recorded ones are marked stopped. Returns their job ids
    (``local-PID``). A stage recorded on another machine raises ElsewhereError."""
    orphans = [j for j in record.jobs if j.state == "running" and j.local_pid and azhpc_process_alive(j.local_pid, j.host)]
    unrecorded = unrecorded_stages(paths, record)
    stopped = set(stop_processes([j.local_pid for j in orphans] + unrecorded, timeout_s))
    for job in orphans:
        job.state, job.exit_code = "stopped", None
    return [j.job_id for j in orphans] + [f"local-{pid}" for pid in unrecorded if pid in stopped]


def job_states(paths: RunPaths, record: LaunchRecord) -> dict[str, scheduler.JobState]:
    """SLURM's state of every job in ``record``, asked for the user who submitted them (another user, or an admin,
    may be looking): the record names them; for a record from before it did, the owner of the run's folder."""
    return scheduler.query([j.job_id for j in record.jobs], record.user or scheduler.owner(paths.root))


def write_record(paths: RunPaths, record: LaunchRecord) -> None:
    atomic.write_json(paths.launch_record, record.to_json(), doing="writing the launch record")


def read_record(paths: RunPaths) -> LaunchRecord | None:
    """The launch record, or None for a run made without ``azhpc launch``."""
    if not paths.launch_record.exists():
        return None
    try:
        data = atomic.read_json(paths.launch_record)
        if data.get("schema_version") != RECORD_SCHEMA:
            raise KeyError("schema_version")
        return LaunchRecord.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{paths.launch_record} is not a launch record this azhpc can read ({exc}): "
                          f"use the azhpc version that launched the run") from exc
