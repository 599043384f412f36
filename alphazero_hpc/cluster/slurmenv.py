"""What SLURM tells a process about its job, read in one place: ``SlurmEnv.now()`` is a typed snapshot of the
environment (job, array element, restarts, CPUs, step, ranks, nodes), and the rendezvous port is computed once here.
Outside SLURM every field is empty or its default and ``in_job`` is False."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

RDZV_PORT_BASE = 29400  # torchrun's own default port; a job's rendezvous port is RDZV_PORT_BASE + job id % 1000


def _int(value: str | None, default: int) -> int:
    return int(value) if value and value.strip().lstrip("-").isdigit() else default


@dataclass(frozen=True)
class SlurmEnv:
    job_id: str = ""  # SLURM_JOB_ID: for an array element, its own job id
    array_job_id: str = ""  # SLURM_ARRAY_JOB_ID
    array_task_id: str = ""  # SLURM_ARRAY_TASK_ID
    restart_count: int = 0  # SLURM_RESTART_COUNT: requeues so far
    cpus_per_task: int = 0  # SLURM_CPUS_PER_TASK (0: not set)
    step_id: str = ""  # SLURM_STEP_ID: set inside an srun step
    procid: int = 0  # SLURM_PROCID: this task's global rank in the step
    ntasks: int = 1  # SLURM_NTASKS
    localid: int = 0  # SLURM_LOCALID: rank on this node
    nodeid: int = 0  # SLURM_NODEID: this node's index in the job
    num_nodes: int = 1  # SLURM_JOB_NUM_NODES (or SLURM_NNODES)
    nodelist: str = ""  # SLURM_JOB_NODELIST
    node_name: str = ""  # SLURMD_NODENAME

    @classmethod
    def now(cls, environ: Mapping[str, str] | None = None) -> SlurmEnv:
        e = os.environ if environ is None else environ
        return cls(job_id=e.get("SLURM_JOB_ID", ""), array_job_id=e.get("SLURM_ARRAY_JOB_ID", ""),
                   array_task_id=e.get("SLURM_ARRAY_TASK_ID", ""), restart_count=_int(e.get("SLURM_RESTART_COUNT"), 0),
                   cpus_per_task=_int(e.get("SLURM_CPUS_PER_TASK"), 0), step_id=e.get("SLURM_STEP_ID", ""),
                   procid=_int(e.get("SLURM_PROCID"), 0), ntasks=_int(e.get("SLURM_NTASKS"), 1),
                   localid=_int(e.get("SLURM_LOCALID"), 0), nodeid=_int(e.get("SLURM_NODEID"), 0),
                   num_nodes=_int(e.get("SLURM_JOB_NUM_NODES") or e.get("SLURM_NNODES"), 1),
                   nodelist=e.get("SLURM_JOB_NODELIST", ""), node_name=e.get("SLURMD_NODENAME", ""))

    @property
    def in_job(self) -> bool:
        return bool(self.job_id)

    @property
    def in_step(self) -> bool:
        """Inside an srun step of a job (where ranks and nodes mean something)."""
        return self.in_job and bool(self.step_id)

    @property
    def job_key(self) -> str:
        """The id scontrol and squeue want: ``ARRAYJOB_TASK`` for an array element, else the job id ('' outside)."""
        if self.array_job_id and self.array_task_id:
            return f"{self.array_job_id}_{self.array_task_id}"
        return self.job_id

    @property
    def record_id(self) -> str:
        """The id a progress record keeps: the array's job id for an element (what ``azhpc status`` lists)."""
        return self.array_job_id or self.job_id

    @property
    def first_node(self) -> str:
        from .scheduler import first_node

        return first_node(self.nodelist) if self.nodelist else ""

    @property
    def rendezvous_port(self) -> int:
        """The port of this job's rendezvous (torchrun's c10d store, or MASTER_PORT for srun-started ranks)."""
        return RDZV_PORT_BASE + _int(self.job_id, 0) % 1000


def without_job_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that submits jobs from inside a job (sbatch would take the running job's
    SLURM_* settings, such as its memory or CPU counts, for the new job's): everything but SLURM's variables."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not k.startswith("SLURM_")}
