"""``azhpc launch``: the AlphaZero loop as a chain of stages, on SLURM (submitit) or on this machine; also
``azhpc resume`` and ``azhpc cancel``.

    plan.py     what to run: tasks per generation, resources, the array split (pure, no side effects)
    record.py   RUN/launch.json: the plan and every job id per generation and stage, written atomically
    stages.py   what a compute node runs: one self-play task, one training job (srun torchrun)
    slurm.py    submits the chain through submitit with dependencies, then returns
    window.py   a window of generations at a time under the site's submit limit; training jobs extend the chain
    local.py    runs the same stages as processes on this machine
    start.py    launch(): config, plan and record, then the chain or the local supervisor
    resume.py   submits exactly the work a run is missing; cancel.py stops a run's jobs
    importing.py  azhpc import-pgn here or as a SLURM array
"""

from .plan import LaunchPlan, make_plan

__all__ = ["LaunchPlan", "make_plan"]
