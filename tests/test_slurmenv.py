"""SLURM's environment, read in one place (cluster/slurmenv.py), and nowhere else in the package."""

import re

from alphazero_hpc.cluster.slurmenv import RDZV_PORT_BASE, SlurmEnv

from .conftest import ROOT


def test_an_array_element_in_a_step_is_read_as_typed_fields():
    env = SlurmEnv.now({"SLURM_JOB_ID": "1234", "SLURM_ARRAY_JOB_ID": "1200", "SLURM_ARRAY_TASK_ID": "34",
                        "SLURM_RESTART_COUNT": "2", "SLURM_CPUS_PER_TASK": "12", "SLURM_STEP_ID": "0",
                        "SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
                        "SLURM_NNODES": "4", "SLURM_JOB_NODELIST": "gpu[07-10]", "SLURMD_NODENAME": "gpu09"})
    assert env.in_job and env.in_step and env.job_key == "1200_34" and env.record_id == "1200"
    assert (env.restart_count, env.cpus_per_task, env.procid, env.ntasks, env.localid, env.nodeid, env.num_nodes) == \
        (2, 12, 5, 16, 1, 2, 4)
    assert env.nodelist == "gpu[07-10]" and env.rendezvous_port == RDZV_PORT_BASE + 234


def test_outside_slurm_everything_is_empty():
    env = SlurmEnv.now({})
    assert not env.in_job and not env.in_step and env.job_key == "" and env.cpus_per_task == 0 and env.ntasks == 1
    assert SlurmEnv.now({"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "garbage"}).cpus_per_task == 0


def test_no_other_module_reads_slurm_variables():
    readers = []
    for path in sorted((ROOT / "alphazero_hpc").rglob("*.py")):
        if path.name == "slurmenv.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(environ|getenv|\be\.get|\be\[)\W*[\"']SLURMD?_", line):
                readers.append(f"{path.relative_to(ROOT)}:{n}")
    assert not readers, readers
