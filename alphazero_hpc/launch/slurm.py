"""Submit a run's whole chain of generations to SLURM through submitit, then return.

Per generation G (docs/pipeline.md has the why):

    train -1     pretraining (launch --pretrain)     --dependency=afterok:<import arrays still queued>
    selfplay G   job array, one task per GPU        --dependency=afterok:<train G-1>   (G = 0: pretraining or none)
    train G      N nodes x 1 task, all their GPUs   --dependency=afterany:<arrays G>,afterok:<train G-1>
    eval G+1     1 task, 1 GPU (eval.enabled)       --dependency=afterok:<train G>   (nothing waits for it)

Every dependent job carries ``--kill-on-invalid-dep=yes``: when a dependency can never be met (training
failed) SLURM cancels the job instead of leaving it PENDING forever. ``afterany`` on the arrays means a
failed self-play task does not block training; the training job then applies the minimum-data rule
(``train.min_selfplay_fraction``) and fails with a clear error when too little data was made, which
cancels the rest of the chain. No process stays alive on the login node.
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path
from typing import Callable

import submitit
from submitit.slurm.slurm import _make_sbatch_string  # submitit's own renderer, for --dry-run

from ..cluster.limits import is_submit_limit, read_submit_limit
from ..config import Config
from ..errors import AzhpcError
from ..store.paths import RunPaths, check_run_root
from .plan import LaunchPlan, split_tasks
from .record import JobRecord
from .stages import TrainStage, eval_stage, import_stage, selfplay_stage, torchrun_command


class _ScriptExecutor(submitit.SlurmExecutor):
    """Validates and converts parameters like submitit, for a dry run: never submits (and needs no srun)."""

    @classmethod
    def affinity(cls) -> int:
        return 2

    def _internal_process_submissions(self, delayed_submissions):  # pragma: no cover - a guard
        raise RuntimeError("a dry run must not submit")

    def render(self, array_size: int | None) -> str:
        return _make_sbatch_string(command=self._submitit_command_str, folder=self.folder, map_count=array_size,
                                   **self.parameters)


def _submit_error(what: str, exc: Exception, account: str = "", qos: str = "") -> AzhpcError:
    text = " ".join(str(exc).split())
    if "sbatch" in text and "error:" in text:
        text = text[text.index("error:"):]
    if is_submit_limit(text):
        return AzhpcError(f"sbatch refused the {what}: {text[:300]}; the site's submit limit is {read_submit_limit(account=account, qos=qos)}: "
                          f"set slurm.max_submit_jobs below it (the chain is then submitted a window at a time), or "
                          f"wait for other jobs to finish (squeue -u $USER, or -A ACCOUNT / -q QOS for a group cap) and run azhpc resume")
    return AzhpcError(f"sbatch refused the {what}: {text[:300]}; check --partition/--account/--qos and the resources asked")


class SlurmChain:
    """Submits stages with submitit; ``dry_run`` collects the scripts instead of calling sbatch."""

    def __init__(self, paths: RunPaths, cfg: Config, plan: LaunchPlan, dry_run: bool = False) -> None:
        self.paths, self.cfg, self.plan, self.dry_run = paths, cfg, plan, dry_run
        self.scripts: list[tuple[str, str]] = []  # (title, sbatch script) in dry-run
        self._next_fake = 900001
        check_run_root(paths.root.resolve())
        self.folder = paths.logs.resolve()  # a dry run renders the scripts with it too, quoted as submitted
        self.run = str(paths.root.resolve())
        self.name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(self.run).name)[:40]
        self.submitted: list[JobRecord] = []  # everything submitted so far (cancelled if a later sbatch fails)
        self.on_submit: Callable[[JobRecord], None] | None = None  # told of each job as soon as sbatch returns its id

    def _submitted(self, job: JobRecord) -> JobRecord:
        self.submitted.append(job)
        if self.on_submit is not None:
            self.on_submit(job)
        return job

    def _executor(self) -> submitit.SlurmExecutor:
        cls = _ScriptExecutor if self.dry_run else submitit.SlurmExecutor
        return cls(folder=self.folder / "%j", max_num_timeout=self.cfg.slurm.max_slices)

    def _common(self, dependency: str) -> dict:
        s = self.cfg.slurm
        params: dict = {"setup": ["export HDF5_USE_FILE_LOCKING=FALSE", f"export OMP_NUM_THREADS={s.cpus_per_task}"],
                        # USR2 before the time limit, after the stages' own stop at stop_margin_s (preempt.py): a backstop
                        "signal_delay_s": s.signal_lead_s or max(10, s.stop_margin_s // 2),
                        "additional_parameters": {"requeue": True}}  # preemption and node failure requeue the job
        for key in ("partition", "account", "qos"):
            if getattr(s, key):
                params[key] = getattr(s, key)
        if dependency:
            params["dependency"] = dependency
            params["additional_parameters"]["kill-on-invalid-dep"] = "yes"
        return params

    def _submit(self, what: str, ex: submitit.SlurmExecutor, submit: Callable[[], list], array_size: int | None) -> list[str]:
        """Job ids of the submission (one per array element); a dry run renders the script instead."""
        if isinstance(ex, _ScriptExecutor):
            job_id = str(self._next_fake)
            self._next_fake += 1
            self.scripts.append((what, ex.render(array_size)))
            return [f"{job_id}_{i}" for i in range(array_size)] if array_size else [job_id]
        sink = io.StringIO()  # submitit echoes sbatch's stderr; the error below says it in one line
        try:
            with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
                jobs = submit()
        except Exception as exc:  # noqa: BLE001 - submitit raises several types for a refused sbatch
            raise _submit_error(what, exc, self.cfg.slurm.account, self.cfg.slurm.qos) from exc
        return [j.job_id for j in jobs]

    def submit_selfplay(self, generation: int, after_train: str = "", attempt: int = 1,
                        tasks: list[int] | None = None) -> list[JobRecord]:
        """Arrays for ``tasks`` (default all) of ``generation``, split at MaxArraySize."""
        s, plan = self.cfg.slurm, self.plan
        dependency = f"afterok:{after_train}" if after_train else ""
        todo = list(range(plan.tasks)) if tasks is None else sorted(tasks)
        records = []
        for part in split_tasks(len(todo), plan.max_array_size):
            chunk = todo[part.start : part.stop]
            ex = self._executor()
            ex.update_parameters(
                job_name=f"azhpc-{self.name}-sp{generation}", time=s.selfplay_time_min, nodes=1, ntasks_per_node=1,
                cpus_per_task=s.cpus_per_task, array_parallelism=len(chunk),
                **({"gpus_per_node": 1} if plan.gpus_per_node else {}), **self._common(dependency))
            n, run = len(chunk), self.run
            contiguous = chunk == list(range(chunk[0], chunk[-1] + 1))
            what = f"tasks {chunk[0]}-{chunk[-1]}" if contiguous else "tasks " + ",".join(map(str, chunk))
            jobs = self._submit(f"generation {generation} self-play array ({what})", ex,
                                lambda: ex.map_array(selfplay_stage, [run] * n, [generation] * n, chunk, [plan.tasks] * n),
                                n if n > 1 else None)
            job_id = jobs[0].split("_")[0]
            records.append(self._submitted(JobRecord(generation, "selfplay", job_id, [chunk[0], chunk[-1] + 1], attempt,
                                                     dependency, indices=[] if contiguous else chunk)))
        return records

    def submit_import(self, tasks: list[int]) -> list[str]:
        """Arrays of ``azhpc import-pgn`` tasks (CPU only; the files and filters are in RUN/import/import.json)."""
        s = self.cfg.slurm
        ids = []
        for part in split_tasks(len(tasks), self.plan.max_array_size):
            chunk = tasks[part.start : part.stop]
            ex = self._executor()
            ex.update_parameters(job_name=f"azhpc-{self.name}-import", time=s.selfplay_time_min, nodes=1, ntasks_per_node=1,
                                 cpus_per_task=1, array_parallelism=len(chunk), **self._common(""))
            n, run = len(chunk), self.run
            jobs = self._submit(f"import array (tasks {chunk[0]}-{chunk[-1]})", ex,
                                lambda: ex.map_array(import_stage, [run] * n, chunk), n if n > 1 else None)
            ids.append(jobs[0].split("_")[0])
        return ids

    def submit_train(self, generation: int, arrays: list[str], after_train: str = "", attempt: int = 1,
                     after_ok: list[str] | None = None) -> JobRecord:
        """Training of ``generation`` (-1: pretraining on the imported games, after the ``after_ok`` jobs)."""
        s, plan = self.cfg.slurm, self.plan
        ok = ([after_train] if after_train else []) + list(after_ok or [])
        parts = ([f"afterany:{':'.join(arrays)}"] if arrays else []) + ([f"afterok:{':'.join(ok)}"] if ok else [])
        dependency = ",".join(parts)
        ex = self._executor()
        ex.update_parameters(
            job_name=f"azhpc-{self.name}-" + (f"tr{generation}" if generation >= 0 else "pretrain"), time=s.train_time_min, nodes=plan.nodes, ntasks_per_node=1,
            cpus_per_task=s.cpus_per_task * plan.ranks_per_node,
            **({"gpus_per_node": plan.gpus_per_node} if plan.gpus_per_node else {}), **self._common(dependency))
        run = self.run
        what = "pretraining job" if generation < 0 else f"generation {generation} training job"
        job_id = self._submit(what, ex,
                              lambda: [ex.submit(TrainStage(), run, generation, plan.ranks_per_node)], None)[0]
        if self.dry_run:
            title, script = self.scripts[-1]
            each = shlex.join(torchrun_command(run, generation, plan.ranks_per_node, (plan.nodes, 0, "<first node>", "$SLURM_JOB_ID")))
            self.scripts[-1] = (title, script + f"# each node's task runs (stages.train_stage):\n#   {each}\n")
        return self._submitted(JobRecord(generation, "train", job_id, [0, 1], attempt, dependency))

    def submit_eval(self, generation: int, after_train: str, attempt: int = 1) -> JobRecord:
        """Evaluation of the network training ``generation`` writes (generation + 1): afterok on that training
        job, and nothing depends on it, so it never holds up the next self-play array."""
        s, plan = self.cfg.slurm, self.plan
        dependency = f"afterok:{after_train}"
        ex = self._executor()
        ex.update_parameters(
            job_name=f"azhpc-{self.name}-ev{generation + 1}", time=self.cfg.eval.time_min, nodes=1, ntasks_per_node=1,
            cpus_per_task=s.cpus_per_task, **({"gpus_per_node": 1} if plan.gpus_per_node else {}), **self._common(dependency))
        run = self.run
        job_id = self._submit(f"generation {generation + 1} evaluation job", ex,
                              lambda: [ex.submit(eval_stage, run, generation + 1)], None)[0]
        return self._submitted(JobRecord(generation, "eval", job_id, [0, 1], attempt, dependency))

    def submit_generations(self, first: int, last: int, after_train: str = "", after_import: list[str] | None = None) -> list[JobRecord]:
        """Self-play and training of generations first..last-1, each chained on the previous training, and
        with ``eval.enabled`` an evaluation job after each training job. With the plan's ``pretrain`` and
        ``first`` 0, the pretraining job comes first (after the import arrays ``after_import`` still queued)."""
        records: list[JobRecord] = []
        if self.plan.pretrain and first == 0:
            records.append(self.submit_train(-1, [], "", after_ok=after_import))
            after_train = records[-1].job_id
        for g in range(first, last):
            arrays = self.submit_selfplay(g, after_train)
            train = self.submit_train(g, [r.job_id for r in arrays], after_train)
            records += arrays + [train]
            if self.cfg.eval.enabled:
                records.append(self.submit_eval(g, train.job_id))
            after_train = train.job_id
        return records
