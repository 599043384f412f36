"""The scheduler as seen from a job and from the login node: SLURM job states from squeue and sacct
(``scheduler``), and stopping in time: signals, the time limit, requeue (``preempt``)."""
