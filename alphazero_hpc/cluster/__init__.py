"""The scheduler as seen from a job and from the login node: SLURM job states from squeue and sacct
(``scheduler``), what SLURM tells a job about itself, read in one place (``slurmenv``), and stopping in time:
signals, the time limit, requeue (``preempt``)."""
