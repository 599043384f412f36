"""The scheduler as seen from a job and from the login node: SLURM job states from squeue and sacct
(``scheduler``), what SLURM tells a job about itself, read in one place (``slurmenv``), this machine's processes
as ``/proc`` shows them (``procs``), the site's submit limits (``limits``), and stopping in time: signals, the time limit, requeue (``preempt``)."""
