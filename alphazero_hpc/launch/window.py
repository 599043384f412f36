"""A chain of generations submitted a window at a time, so that the run never has more job records queued than
the site allows (``cluster.limits``), and extended from inside the allocation as generations finish.

``azhpc launch`` submits as many whole generations (self-play array elements + training + evaluation) as fit
under the submit limit beside the user's other queued jobs. Each training job, once its network is written,
submits the generations that fit now, chained on the newest training job (``extend_chain``, called by
``stages.train_stage`` on the first node): no process waits on the login node, and the run's own finished jobs
make the room. ``azhpc resume`` submits within the same window; ``azhpc cancel`` stops the extension (the
extension reads the launch record under its lock and does nothing after a cancel). With no limit found, the
window is the whole chain, as before. The controller may still count a job that has just left the queue: a refusal
by the limit, with nothing of the generation left queued, is tried again for ``LIMIT_WAIT_S`` before it is given up.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Iterator

from ..cluster.limits import SubmitLimit, is_submit_limit, lowest, read_submit_limits, room
from ..config import Config
from ..errors import AzhpcError, RunDirError, failure_line
from ..store.paths import RunPaths
from ..store.runconfig import read_run_config
from .plan import LaunchPlan
from .record import JobRecord, LaunchRecord, read_record, record_lock, write_record


def records_per_generation(plan: LaunchPlan, cfg: Config) -> int:
    """Job records one generation queues: one per self-play task, the training job, the evaluation job."""
    return plan.tasks + 1 + int(cfg.eval.enabled)


@dataclass(frozen=True)
class Window:
    """How many more generations may be queued now, and why."""

    generations: int
    limit: SubmitLimit  # of the caps the jobs meet, the one that leaves the least room
    queued: int  # the job records in that limit's scope when it was measured
    per_generation: int
    cap: SubmitLimit = SubmitLimit(None, "")  # the lowest cap of them all (what no window can exceed)

    def describe(self) -> str:
        if self.limit.jobs is None:
            return "the whole chain at once (no submit limit found)"
        return (f"{self.generations} generation(s) now ({self.per_generation} job records each; {self.limit}, "
                f"{self.queued} queued)")


def measure(cfg: Config, plan: LaunchPlan, remaining: int, extra: int = 0) -> Window:
    """The window for ``remaining`` generations still to submit; ``extra`` records go first (pretraining)."""
    per = records_per_generation(plan, cfg)
    limits = read_submit_limits(cfg.slurm.max_submit_jobs, account=cfg.slurm.account, qos=cfg.slurm.qos)
    least = room(limits)
    if least is None:
        return Window(remaining, SubmitLimit(None, ""), 0, per)
    free, limit, queued = least
    return Window(max(0, min(remaining, (free - extra) // per)), limit, queued, per, lowest(limits))


def first_window(cfg: Config, plan: LaunchPlan, extra: int = 0) -> Window:
    """The launch's window; one line naming the limit when not even one generation fits, or when the chain could
    not extend itself (a training job extends it while it and its evaluation job still count in the queue)."""
    w = measure(cfg, plan, plan.generations, extra)
    if w.generations == 0:
        need = w.per_generation + extra
        assert w.limit.jobs is not None and w.cap.jobs is not None
        if need > w.cap.jobs:
            raise AzhpcError(f"one generation needs {need} job records ({plan.tasks} self-play tasks, training"
                             f"{', evaluation' if cfg.eval.enabled else ''}{', pretraining' if extra else ''}) but the site "
                             f"allows {w.cap.jobs} ({w.cap}): lower --tasks to at most "
                             f"{max(1, w.cap.jobs - need + plan.tasks)} or ask the site for a higher limit")
        raise AzhpcError(f"{w.queued} job records already count against {w.limit} and one generation needs {need} "
                         f"more; wait for some to finish ({_listing(w.limit)}) and launch again")
    steady = w.per_generation + 1 + int(cfg.eval.enabled)  # a generation beside the extending job and its evaluation
    if w.cap.jobs is not None and plan.generations > w.generations and steady > w.cap.jobs:
        raise AzhpcError(f"the chain submits a generation ({w.per_generation} job records) from inside a training job, "
                         f"while that job{' and its evaluation' if cfg.eval.enabled else ''} still count, {steady} records "
                         f"in all, but the site allows {w.cap.jobs} ({w.cap}): lower --tasks to at most "
                         f"{max(1, w.cap.jobs - steady + plan.tasks)}, or launch at most {max(1, w.generations)} "
                         f"generation(s) (--generations), or ask the site for a higher limit")
    return w


def _listing(limit: SubmitLimit) -> str:
    """The command(s) that list the records ``limit`` counts."""
    squeue = " ".join(["squeue -a -r", *limit.squeue_scope()])
    query = limit.assoc_mgr_query()  # the controller's own count, which sbatch checks
    return f"{squeue}; the controller's count: scontrol show assoc_mgr {' '.join(query)}" if query else squeue


def _cancelled(record: LaunchRecord) -> bool:
    """Whether the newest cancel of the run came after its newest resume."""
    for event in reversed(record.events):
        if event.get("event") in ("cancel", "resume"):
            return event["event"] == "cancel"
    return False


STOP_REQUESTED: list[str] = []  # set by SIGTERM in the extension's own process: it stops between two submissions


def last_submitted(record: LaunchRecord) -> int:
    """The newest generation with a training job in the record (-1: none)."""
    return max((j.generation for j in record.jobs if j.stage == "train"), default=-1)


LIMIT_WAIT_S = 180.0  # how long an extension waits for room under the submit limit before it gives up
LIMIT_POLL_S = 10.0


class NoRoom(AzhpcError):
    """The submit limit left no room for the next generation, and nothing of it is queued: waiting may make room
    (a job that has just ended still counts in the controller for a moment)."""


def extend_chain(paths: RunPaths, trained: int, wait_s: float = LIMIT_WAIT_S) -> list[JobRecord]:
    """Submit the generations of a SLURM run that fit under the submit limit now, after its newest training job
    (called when generation ``trained``'s training has written its network). Returns what it submitted: nothing for
    a local run, a complete chain, a cancelled run, or a full window while a newer training job is queued (it
    extends the chain in turn). Where the limit leaves no room after the newest training job (the chain would
    stop), it looks again every ``LIMIT_POLL_S`` for ``wait_s`` seconds, then raises."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _extend_once(paths, trained)
        except NoRoom:
            if STOP_REQUESTED or time.monotonic() + LIMIT_POLL_S > deadline:
                raise
        time.sleep(LIMIT_POLL_S)
        if STOP_REQUESTED:  # SIGTERM while it waited
            raise SystemExit(f"chain extension stopped by {STOP_REQUESTED[0]}")


def _extend_once(paths: RunPaths, trained: int) -> list[JobRecord]:
    from .slurm import SlurmChain
    from ..cluster import scheduler

    with _waiting_lock(paths):
        record = read_record(paths)
        if record is None or record.plan.cluster != "slurm" or _cancelled(record):
            return []
        done_through = last_submitted(record)
        remaining = record.plan.generations - (done_through + 1)
        if remaining <= 0:
            return []
        cfg = read_run_config(paths)
        w = measure(cfg, record.plan, remaining)
        if w.generations == 0:
            if trained < done_through:  # a newer training job is queued: it extends the chain when it ends
                return []
            raise NoRoom(f"no room under the submit limit ({w.limit}, {w.queued} job records counted against it) for "
                         f"generation {done_through + 1}; azhpc resume submits it once other jobs have left the queue "
                         f"({_listing(w.limit)})")
        chain = SlurmChain(paths, cfg, record.plan)
        after = record.jobs_of(done_through, "train")[-1].job_id
        known = list(record.jobs)

        def remember(job: JobRecord) -> None:  # on disk before the next sbatch: a killed extension leaves no job unknown
            record.jobs.append(job)
            write_record(paths, record)
            if STOP_REQUESTED:  # SIGTERM: stop between two submissions, never inside sbatch
                raise SystemExit(f"chain extension stopped by {STOP_REQUESTED[0]}")

        chain.on_submit = remember
        try:
            new = chain.submit_generations(done_through + 1, done_through + 1 + w.generations, after_train=after)
        except BaseException as exc:
            ids = [j.job_id for j in chain.submitted]
            if scheduler.cancel(ids):  # whole generations or nothing
                record.jobs = known
                write_record(paths, record)
                if isinstance(exc, AzhpcError) and is_submit_limit(str(exc)):
                    raise NoRoom(str(exc)) from exc
                raise
            # still queued: they stay on record, or nothing would know them
            record.events.append({"time": time.time(), "event": "extend failed", "jobs": ids,
                                  "error": f"{failure_line(exc)}; scancel of the jobs it had submitted failed"})
            write_record(paths, record)
            raise
        record.events.append({"time": time.time(), "event": "extend", "generations": [done_through + 1, done_through + w.generations],
                              "jobs": [j.job_id for j in new], "window": w.describe()})
        write_record(paths, record)
    print(f"chain: submitted generations {done_through + 1}-{done_through + w.generations} ({w.describe()})", flush=True)
    return new


@contextlib.contextmanager
def _waiting_lock(paths: RunPaths, timeout_s: float = 120.0) -> Iterator[None]:
    """The run's record lock, waited for (a resume or cancel may hold it for a moment)."""
    deadline = time.time() + timeout_s
    while True:
        try:
            with record_lock(paths, "azhpc chain extension (a training job)"):
                yield
            return
        except RunDirError as exc:
            if "in use by" not in str(exc) or time.time() > deadline:
                raise
            time.sleep(2.0)


def extend_after_training(paths: RunPaths, trained: int) -> None:
    """``extend_chain`` from a training job whose network is written: a failure is said in one line on stderr and
    recorded, never raised (the network is safe; ``azhpc resume`` submits what is missing)."""
    try:
        extend_chain(paths, trained)
    except Exception as exc:  # noqa: BLE001 - the training succeeded; its job must not fail for this
        line = failure_line(exc)
        print(f"chain: could not submit the next generations ({line}); azhpc resume {paths.root} submits them",
              file=sys.stderr, flush=True)
        try:
            with _waiting_lock(paths):
                record = read_record(paths)
                if record is not None:
                    record.events.append({"time": time.time(), "event": "extend failed", "error": line})
                    write_record(paths, record)
        except Exception:  # noqa: BLE001 - the line above said it
            pass


if __name__ == "__main__":  # python -m alphazero_hpc.launch.window RUN G: what generation G's finished training runs
    import signal
    from pathlib import Path

    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # SLURM's warning is for the training job, not for this

    def _stop(signum: int, frame: object) -> None:  # the job ending (SIGTERM before SIGKILL): stop after this sbatch
        STOP_REQUESTED.append(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, _stop)
    extend_after_training(RunPaths(Path(sys.argv[1])), int(sys.argv[2]))
