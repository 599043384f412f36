"""``azhpc cancel RUN``: stop every pending and running job of a run and say so in its launch record.

On SLURM: ``scancel`` of every job the record lists (finished ones are ignored by SLURM). Locally: SIGTERM
to the supervisor, which stops its stage processes and records ``cancelled``; stage processes of a
supervisor that is already gone are stopped directly. Work already in complete shards or training states stays.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..cluster import scheduler
from ..errors import AzhpcError, RunDirError
from ..store.paths import RunPaths
from .record import azhpc_process_alive, job_states, read_record, record_lock, stop_orphans, stop_processes, supervisor_holder, write_record


def cancel_run(run_dir: Path, timeout_s: float = 30.0) -> list[str]:
    """Cancel the run's jobs; returns the job ids that were pending or running."""
    paths = RunPaths(Path(run_dir))
    with record_lock(paths, "azhpc cancel"):
        return _cancel(paths, timeout_s)


def _cancel(paths: RunPaths, timeout_s: float) -> list[str]:
    record = read_record(paths)
    if record is None:
        raise RunDirError(f"{paths.root} has no launch record ({paths.launch_record}): only launched runs can be cancelled")
    if record.plan.cluster == "slurm":
        states = job_states(paths, record)
        live = sorted({k.split("_")[0] for k, s in states.items() if s.active})
        if live and not scheduler.cancel(live):
            raise AzhpcError(f"scancel failed for jobs {', '.join(live)}: check that SLURM answers (squeue) and retry")
        record = read_record(paths) or record
    else:
        live = []
        host = record.supervisor.get("host", "")
        pid = int(record.supervisor.get("pid", 0) or 0)
        if not (record.supervisor.get("state") == "running" and azhpc_process_alive(pid, host)):
            pid, host = supervisor_holder(paths)  # one just started, not yet in the record
            if pid < 0:
                raise RunDirError(f"a supervisor holds {paths.supervisor_lock} but has not named itself yet: "
                                  f"run azhpc cancel {paths.root} again in a moment")
        if pid and azhpc_process_alive(pid, host):  # one hung past timeout_s is SIGKILLed: its stages are orphans below
            live += [f"local-{p}" for p in stop_processes([pid], timeout_s)]
        record = read_record(paths) or record
        live += stop_orphans(paths, record, timeout_s)
        for job in record.jobs:
            if job.state == "running" and job.local_pid:
                job.state = "cancelled"
        if record.supervisor.get("state") == "running":
            record.supervisor["state"] = "cancelled"
    record.events.append({"time": time.time(), "event": "cancel", "jobs": live})
    write_record(paths, record)
    return live
