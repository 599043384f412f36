"""``azhpc resume RUN``: compare the run folder with the scheduler and submit exactly the missing work.

The folder says what is finished (a task whose progress says ``done``, a generation whose checkpoint
exists); the scheduler says what is still coming (pending, running or requeued jobs). Everything else is
missing and is submitted again, generation by generation:

- self-play tasks that failed, were cancelled, or were never submitted: one array of just those tasks;
- a training job that failed or was cancelled, or is pending on a dependency that can no longer be met
  (or would start before the tasks resubmitted for its generation): a new one, after the new arrays;
- every later generation whose jobs hung on what was replaced: cancelled and submitted again.

Finished work is never redone (tasks keep their shards, a running training job is left alone), so a second
``resume`` right after the first finds everything pending or running and submits nothing. A task or
training job that has failed ``slurm.max_attempts`` times is not submitted again: it is reported, with its
error, until the user fixes the cause and allows more (``azhpc resume --max-attempts N``). Locally, resume
starts a new supervisor when none is running; it runs the tasks that are not done, then training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cluster import scheduler
from ..errors import AzhpcError, RunDirError
from ..store.paths import RunPaths
from ..store.progress import read_task_progress, read_train_progress, task_done
from ..store.runconfig import read_run_config
from . import plan as planning
from .window import last_submitted, measure
from .record import JobRecord, LaunchRecord, azhpc_process_alive, job_states, read_record, record_lock, stop_orphans, supervisor_holder, write_record

RAN_AND_FAILED = scheduler.FAILED - {"CANCELLED"}  # a cancelled job never counts as an attempt that failed


@dataclass
class ResumeResult:
    paths: RunPaths
    submitted: list[JobRecord] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # job ids left alone: still pending or running
    gave_up: list[str] = field(default_factory=list)  # one line per task or job not retried any more
    message: str = ""
    supervisor_pid: int = 0
    run_here: bool = False  # local, not detached: the caller runs the supervisor in its own process


def _gave_up(what: str, failed: int, error: str) -> str:
    return (f"{what} failed {failed} times ({error or 'see its log'}): not run again; fix the cause, then "
            f"azhpc resume --max-attempts {failed + 1}")


def _failures(jobs: list[JobRecord], states: dict[str, scheduler.JobState], progress_failed: bool, task: int | None = None) -> int:
    """Submissions of a task (or training job) that ran and failed: SLURM says so, or, without accounting,
    the job is gone and its progress file says failed."""
    n = 0
    for job in jobs:
        st = scheduler.element_state(states, job.job_id, job.element(task), job.size) if task is not None else states.get(job.job_id)
        if st is not None and st.state in RAN_AND_FAILED:
            n += 1
        elif st is None and progress_failed:
            n += 1
    return n


def resume(run_dir: Path, generations: int | None = None, max_attempts: int | None = None, detach: bool = True,
           command: str = "") -> ResumeResult:
    paths = RunPaths(Path(run_dir))
    with record_lock(paths, "azhpc resume"):
        record = read_record(paths)
        if record is None:
            raise RunDirError(f"{paths.root} has no launch record ({paths.launch_record}): start it with azhpc launch --run-dir {paths.root}")
        cfg = read_run_config(paths)
        limit = max_attempts or cfg.slurm.max_attempts
        if generations is not None:
            if generations < record.plan.generations:
                raise AzhpcError(f"--generations {generations} is below the {record.plan.generations} this run already plans: "
                                 f"it can only grow")
            record.plan = replace(record.plan, generations=generations)
        event = {"time": time.time(), "event": "resume", "command": command, "generations": record.plan.generations}
        if record.plan.cluster == "local":
            return _resume_local(paths, record, detach, event, limit)
        if planning.detect_cluster() != "slurm":
            raise AzhpcError("no SLURM cluster answers here (sinfo failed or is missing): run azhpc resume on the "
                             "cluster's login node")
        result = _resume_slurm(paths, cfg, record, limit)
        record.events.append({**event, "submitted": [j.job_id for j in result.submitted], "cancelled": result.cancelled,
                              "gave_up": result.gave_up})
        write_record(paths, record)
    return result


def _resume_local(paths: RunPaths, record: LaunchRecord, detach: bool, event: dict, limit: int) -> ResumeResult:
    result = ResumeResult(paths)
    if paths.model(record.plan.generations).exists():
        result.message = f"the run is complete ({paths.model(record.plan.generations)} exists): nothing to resume"
        return result
    pid = int(record.supervisor.get("pid", 0) or 0)
    if record.supervisor.get("state") == "running" and azhpc_process_alive(pid, record.supervisor.get("host", "")):
        result.message = f"the local supervisor (pid {pid}) is still running this run: nothing to resume"
        return result
    holder, where = supervisor_holder(paths)  # one just started, not yet in the record (or one the record lost)
    if holder:
        result.message = (f"a local supervisor (pid {holder if holder > 0 else '?'} on {where or '?'}) is still "
                          "running this run: nothing to resume")
        return result
    orphans = stop_orphans(paths, record)  # a supervisor killed hard leaves its stage processes running: never two copies
    if orphans:
        write_record(paths, record)
        result.cancelled = orphans
    g = next(g for g in range(record.plan.generations) if not paths.model(g + 1).exists())
    for t in range(record.plan.tasks):
        failed = record.local_failures(g, t)
        if not task_done(paths.progress(g, t)) and len(failed) >= limit:
            progress = read_task_progress(paths.progress(g, t))
            error = (progress.error if progress else "") or f"exit status {failed[-1].exit_code}"
            result.gave_up.append(_gave_up(f"generation {g} task {t}", len(failed), error))
    if result.gave_up:
        return result
    record.supervisor.update({"state": "resuming", "error": "", "max_attempts": limit})
    record.events.append(event)
    write_record(paths, record)  # before the supervisor starts: from then on it is the record's only writer
    if detach:
        from .local import start_detached

        result.supervisor_pid = start_detached(paths.root)
        result.message = f"started the local supervisor, pid {result.supervisor_pid}"
    else:
        result.run_here = True
        result.message = "running the local supervisor in this process"
    return result


def _resume_slurm(paths: RunPaths, cfg, record: LaunchRecord, limit: int) -> ResumeResult:
    from .slurm import SlurmChain

    result = ResumeResult(paths)
    states = job_states(paths, record)
    chain = SlurmChain(paths, cfg, record.plan)
    after_train = ""  # the live training job of the previous generation, if any
    replaced = False  # something upstream was resubmitted: every later live job hangs on a stale id
    cancel: list[str] = []
    # generations never submitted (a launch or extension under a submit limit): only as many as fit now; the
    # training jobs submit the rest as they finish (launch/window.py)
    room_now = measure(cfg, record.plan, record.plan.generations - 1 - last_submitted(record))
    fresh = room_now.generations
    try:
        if record.plan.pretrain and not paths.model(0).exists():
            after_train, replaced = _resume_pretrain(paths, record, states, chain, limit, result, cancel)
            if not after_train:
                return _finish(paths, record, chain, result, cancel)
        for g in range(record.plan.generations):
            if paths.model(g + 1).exists():
                after_train = ""
                continue
            if not after_train and not paths.model(g).exists():
                break  # generation g-1 cannot train (gave up): nothing after it can run
            train_jobs = record.jobs_of(g, "train")
            train_id = train_jobs[-1].job_id if train_jobs else ""
            tstate = states.get(train_id) if train_id else None
            live = tstate is not None and tstate.active and tstate.reason != "DependencyNeverSatisfied" and not replaced
            live_train = tstate if live else None
            if live_train and live_train.state != "PENDING":  # running (or requeued): it has read its data
                result.kept.append(train_id)
                after_train = train_id
                _evaluate_after(cfg, record, states, g, train_id, chain, result, cancel)
                continue
            missing, live_arrays = _selfplay_todo(paths, record, states, g, limit, replaced, result, cancel)
            if live_train and not missing:
                result.kept.append(train_id)
                after_train = train_id
                _evaluate_after(cfg, record, states, g, train_id, chain, result, cancel)
                continue
            if tstate and tstate.active:
                cancel.append(train_id)
            progress = read_train_progress(paths.train_progress(g + 1))
            failed = _failures(train_jobs, states, progress is not None and progress.status == "failed")
            if failed >= limit:
                result.gave_up.append(_gave_up(f"generation {g} training", failed, progress.error if progress else ""))
                break
            if not train_jobs:
                if fresh == 0:
                    result.message = (f"generations {g}-{record.plan.generations - 1} wait for room under the submit limit "
                                      f"({room_now.limit}): the training jobs submit them")
                    break
                fresh -= 1
            attempt = 1 + len(train_jobs)
            arrays = chain.submit_selfplay(g, after_train, attempt, missing) if missing else []
            new_train = chain.submit_train(g, [a.job_id for a in arrays] + live_arrays, after_train, attempt)
            result.submitted += arrays + [new_train]
            _evaluate_after(cfg, record, states, g, new_train.job_id, chain, result, cancel)
            after_train, replaced = new_train.job_id, True
    except BaseException:
        scheduler.cancel([j.job_id for j in chain.submitted])  # all or nothing: no half chain left queued
        raise
    return _finish(paths, record, chain, result, cancel)


def _evaluate_after(cfg, record: LaunchRecord, states, g: int, train_id: str, chain, result: ResumeResult,
                    cancel: list[str]) -> None:
    """With ``eval.enabled``, the evaluation of the network that ``train_id`` writes: kept when one waits for that
    job, else submitted after it (a first submission; a training job submitted again, whose earlier evaluation
    waited for the one that failed; an extension stopped between the training and the evaluation sbatch). One
    that waits for another training job is cancelled: it can never run."""
    if not cfg.eval.enabled:
        return
    evals = record.jobs_of(g, "eval")
    last = evals[-1] if evals else None
    st = states.get(last.job_id) if last else None
    if last is not None and (st is None or st.state == "COMPLETED"):
        return  # done, or gone from the scheduler's memory: not evaluated twice (azhpc evaluate can)
    if last is not None and st is not None and st.active:
        if last.dependency == f"afterok:{train_id}" and st.reason != "DependencyNeverSatisfied":
            result.kept.append(last.job_id)
            return
        cancel.append(last.job_id)
    result.submitted.append(chain.submit_eval(g, train_id, attempt=1 + len(evals)))


def _resume_pretrain(paths: RunPaths, record: LaunchRecord, states, chain, limit: int, result: ResumeResult,
                     cancel: list[str]) -> tuple[str, bool]:
    """(the live or new pretraining job's id, whether it is new); ('', False) when it gave up."""
    jobs = record.jobs_of(-1, "train")
    job_id = jobs[-1].job_id if jobs else ""
    st = states.get(job_id) if job_id else None
    if st is not None and st.active and st.reason != "DependencyNeverSatisfied":
        result.kept.append(job_id)
        return job_id, False
    if st is not None and st.active:
        cancel.append(job_id)
    progress = read_train_progress(paths.train_progress(0))
    failed = _failures(jobs, states, progress is not None and progress.status == "failed")
    if failed >= limit:
        result.gave_up.append(_gave_up("pretraining", failed, progress.error if progress else ""))
        return "", False
    from .importing import import_jobs_to_wait_for

    after_import = import_jobs_to_wait_for(paths, "slurm", record.plan.world_size)  # without its data a pretraining job would only fail again
    new = chain.submit_train(-1, [], "", 1 + len(jobs), after_ok=after_import)
    result.submitted.append(new)
    return new.job_id, True


def _finish(paths: RunPaths, record: LaunchRecord, chain, result: ResumeResult, cancel: list[str]) -> ResumeResult:
    if cancel and not scheduler.cancel(sorted(set(cancel))):
        result.message = f"scancel of the replaced jobs {', '.join(sorted(set(cancel)))} failed: cancel them by hand"
    result.cancelled = sorted(set(cancel))
    record.jobs += result.submitted
    if not result.submitted:
        result.message = result.message or ("nothing to resume: every missing piece is pending or running"
                                             if result.kept else "nothing to resume")
    return result


def _selfplay_todo(paths: RunPaths, record: LaunchRecord, states, g: int, limit: int, replaced: bool,
                   result: ResumeResult, cancel: list[str]) -> tuple[list[int], list[str]]:
    """(tasks to submit, ids of arrays still live that training must wait for) of generation ``g``."""
    missing: list[int] = []
    live: set[str] = set()
    for t in range(record.plan.tasks):
        if task_done(paths.progress(g, t)):
            continue
        jobs = [j for j in record.jobs_of(g, "selfplay") if t in j.task_ids()]
        job = jobs[-1] if jobs else None
        st = scheduler.element_state(states, job.job_id, job.element(t), job.size) if job else None
        if job is not None and st is not None and st.active:
            hopeless = st.reason == "DependencyNeverSatisfied" or (replaced and st.state == "PENDING")
            if not hopeless:
                live.add(job.job_id)
                result.kept.append(job.element_id(t))
                continue
            cancel.append(job.element_id(t))
        progress = read_task_progress(paths.progress(g, t))
        failed = _failures(jobs, states, progress is not None and progress.status == "failed", t)
        if failed >= limit:
            result.gave_up.append(_gave_up(f"generation {g} task {t}", failed, progress.error if progress else ""))
            continue
        missing.append(t)
    return missing, sorted(live)
