"""Every path of a run, computed in one place (as minigo's fsdb). Names sort by generation and index.

    RUN/config.yaml                                     resolved config, written once
    RUN/models/gen-0003.pt                              network that generation 3's self-play uses
    RUN/selfplay/gen-0003/task-0001/shard-00002.h5      training rows (docs/shard-format.md)
    RUN/selfplay/gen-0003/task-0001/shard-00002.json    sidecar: row count and stats; marks the shard complete
    RUN/selfplay/gen-0003/task-0001/shard-00002.pgn     a sample of the shard's games
    RUN/selfplay/gen-0003/progress/task-0001.json       live progress of the task
    RUN/train/gen-0004/                                 training that writes models/gen-0004.pt
    RUN/train/gen-0004/progress.json                    that training job's status, attempt and error
    RUN/import/import.json                              what azhpc import-pgn imports: files, filters, tasks
    RUN/import/task-0001/shard-00002.h5 (+ .json)       imported games' rows, the same format as self-play's
    RUN/import/progress/task-0001.json                  live progress of an import task
    RUN/train/gen-0000/                                 pretraining on the imported shards (azhpc launch --pretrain)
    RUN/eval/ledger.jsonl                               one line per evaluation match (azhpc evaluate)
    RUN/eval/gen-0003/vs-random-s0-1a2b3c4d.pgn         that match's games (the suffix: SHA-1 of its ledger key)
    RUN/launch.json                                     how the run was launched, every job id (azhpc launch)
    RUN/logs/                                           job logs (submitit, local stage processes)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunDirError

DEFAULT_ROOT = Path("scratch")
_SHARD_RE = re.compile(r"^shard-(\d{5})\.json$")
_MODEL_RE = re.compile(r"^gen-\d{4}\.pt$")


def check_run_root(root: Path) -> Path:
    """``root`` if it can go into job scripts and command lines: no control character (a newline in a path ends
    an #SBATCH line and starts a shell command). Raises RunDirError naming the character otherwise."""
    bad = [c for c in str(root) if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise RunDirError(f"run folder {str(root)!r} has a control character ({bad[0]!r}): choose a path without "
                          "newlines, tabs or escape characters")
    return root


@dataclass(frozen=True)
class RunPaths:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    def model(self, generation: int) -> Path:
        return self.root / "models" / f"gen-{generation:04d}.pt"

    def selfplay(self, generation: int) -> Path:
        return self.root / "selfplay" / f"gen-{generation:04d}"

    def task_dir(self, generation: int, task: int) -> Path:
        return self.selfplay(generation) / f"task-{task:04d}"

    def shard(self, generation: int, task: int, shard: int) -> Path:
        return self.task_dir(generation, task) / f"shard-{shard:05d}.h5"

    def sidecar(self, generation: int, task: int, shard: int) -> Path:
        return self.shard(generation, task, shard).with_suffix(".json")

    def pgn(self, generation: int, task: int, shard: int) -> Path:
        return self.shard(generation, task, shard).with_suffix(".pgn")

    def progress(self, generation: int, task: int) -> Path:
        return self.selfplay(generation) / "progress" / f"task-{task:04d}.json"

    def train_dir(self, generation: int) -> Path:
        return self.root / "train" / f"gen-{generation:04d}"

    def train_progress(self, generation: int) -> Path:
        return self.train_dir(generation) / "progress.json"

    def train_state(self, generation: int) -> Path:
        """The resumable training state (weights, optimizer, data position) of the job writing ``generation``."""
        return self.train_dir(generation) / "state.pt"

    def train_slices(self, generation: int) -> Path:
        """Where each attempt of network ``generation``'s training started (the stall rule's record)."""
        return self.train_dir(generation) / "slices.json"

    def train_outcomes(self, generation: int, node: int) -> Path:
        """Folder of the outcome records (``local-L.json``) of node ``node``'s ranks, read by that node's stage."""
        return self.train_dir(generation) / "outcomes" / f"node-{node}"

    def torchrun_logs(self, generation: int, node: int) -> Path:
        """torchrun's log folder on node ``node`` while it trains ``generation`` (removed when the agent returns, and
        by the next slice where a killed one left it)."""
        return self.train_dir(generation) / f"torchrun-logs-node-{node}"

    def train_metrics(self, generation: int) -> Path:
        """One JSON line per training step of the job writing ``generation``."""
        return self.train_dir(generation) / "metrics.jsonl"

    def tensorboard(self, generation: int) -> Path:
        return self.train_dir(generation) / "tensorboard"

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    @property
    def ledger(self) -> Path:
        return self.eval_dir / "ledger.jsonl"

    @property
    def ledger_lock(self) -> Path:
        return self.eval_dir / ".ledger.lock"

    def eval_pgn(self, generation: int | None, name: str) -> Path:
        """A match's games: under the network's generation, or under ``engines/`` for a match between engines."""
        return self.eval_dir / (f"gen-{generation:04d}" if generation is not None else "engines") / f"{name}.pgn"

    @property
    def eval_claims(self) -> Path:
        """A ladder calibration's claimed blocks, a file each (``evaluate.scale``)."""
        return self.eval_dir / "claims"

    @property
    def calibration_plan(self) -> Path:
        """The ladder calibration this folder plays (``azhpc ladder calibrate --out``)."""
        return self.root / "calibration.json"

    @property
    def calibration_jobs(self) -> Path:
        """The SLURM array that plays it, where one was submitted."""
        return self.root / "calibration-jobs.json"

    def evaluated(self) -> set[str]:
        """The names under ``eval/`` (one listing, so that a refresh opens no missing progress file per generation)."""
        try:
            return {p.name for p in self.eval_dir.iterdir()}
        except OSError:
            return set()

    def eval_progress(self, generation: int) -> Path:
        """The evaluation stage's progress for network ``generation``."""
        return self.eval_dir / f"gen-{generation:04d}" / "progress.json"

    def ratings(self, adjudicate_material: int = 0) -> Path:
        """``azhpc elo``'s ladder (chess rules only, or scored with material adjudication)."""
        name = "ratings.json" if not adjudicate_material else f"ratings-adjudicated-{adjudicate_material}.json"
        return self.eval_dir / name

    def plot(self, name: str) -> Path:
        return self.root / "plots" / f"{name}.png"

    @property
    def launch_record(self) -> Path:
        return self.root / "launch.json"

    @property
    def launch_lock(self) -> Path:
        """Held (flock) by the one launch, resume or cancel working on the run."""
        return self.root / ".launch.lock"

    @property
    def supervisor_lock(self) -> Path:
        """Held (flock) by the run's local supervisor for as long as it lives: never two at once."""
        return self.root / ".supervisor.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def supervisor_log(self) -> Path:
        return self.logs / "local-supervisor.log"

    @property
    def chaos_log(self) -> Path:
        """What ``azhpc bench chaos`` did to the run and found after it, one JSON object a line."""
        return self.logs / "chaos.jsonl"

    def stage_log(self, name: str) -> Path:
        """The log of a local stage process (``local-g0003-selfplay-task0001``)."""
        return self.logs / f"{name}.log"

    # -- what benchmarks leave in a run ---------------------------------------------------------------------
    @property
    def wide_report(self) -> Path:
        """``azhpc bench wide``'s figures for the run (task start-up, status time)."""
        return self.root / "wide.json"

    @property
    def chaos_filler(self) -> Path:
        """The file ``azhpc bench chaos`` fills the run's filesystem with, and deletes."""
        return self.root / ".chaos-filler"

    # -- imported games (azhpc import-pgn) -----------------------------------------------------------------
    @property
    def imports(self) -> Path:
        return self.root / "import"

    @property
    def import_spec(self) -> Path:
        """The import's files, filters and tasks: every task of it, and every rerun, must agree with them."""
        return self.imports / "import.json"

    @property
    def import_jobs(self) -> Path:
        """The SLURM arrays that ``azhpc import-pgn --tasks`` submitted (``launch --pretrain`` waits for them)."""
        return self.imports / "jobs.json"

    def import_task_dir(self, task: int) -> Path:
        return self.imports / f"task-{task:04d}"

    def import_shard(self, task: int, shard: int) -> Path:
        return self.import_task_dir(task) / f"shard-{shard:05d}.h5"

    def import_sidecar(self, task: int, shard: int) -> Path:
        return self.import_shard(task, shard).with_suffix(".json")

    def import_progress(self, task: int) -> Path:
        return self.imports / "progress" / f"task-{task:04d}.json"

    # -- listings ------------------------------------------------------------------------------------------
    def complete_shards(self, generation: int, task: int) -> list[int]:
        """Shard indices of a task whose sidecar exists (a sidecar is written after its shard)."""
        return _complete(self.task_dir(generation, task))

    def import_tasks(self) -> list[int]:
        """Import tasks that have a shard folder."""
        folder = self.imports
        return sorted(int(p.name[5:]) for p in folder.glob("task-[0-9][0-9][0-9][0-9]")) if folder.is_dir() else []

    def import_complete_shards(self, task: int) -> list[int]:
        return _complete(self.import_task_dir(task))

    def import_sidecars(self) -> list[Path]:
        """Sidecars of every complete imported shard, in task and shard order."""
        return [self.import_sidecar(t, k) for t in self.import_tasks() for k in self.import_complete_shards(t)]

    def import_progress_files(self) -> list[Path]:
        folder = self.imports / "progress"
        return sorted(folder.glob("task-[0-9][0-9][0-9][0-9].json")) if folder.is_dir() else []

    def generations(self) -> list[int]:
        """Generations that have a self-play folder."""
        folder = self.root / "selfplay"
        if not folder.is_dir():
            return []
        return sorted(int(p.name[4:]) for p in folder.glob("gen-[0-9][0-9][0-9][0-9]"))

    def tasks(self, generation: int) -> list[int]:
        """Tasks of a generation that have a shard folder."""
        folder = self.selfplay(generation)
        if not folder.is_dir():
            return []
        return sorted(int(p.name[5:]) for p in folder.glob("task-[0-9][0-9][0-9][0-9]"))

    def sidecars(self, generation: int) -> list[Path]:
        """Sidecars of a generation's complete shards, every task, in order."""
        return [self.sidecar(generation, t, k) for t in self.tasks(generation) for k in self.complete_shards(generation, t)]

    def progress_files(self, generation: int) -> list[Path]:
        """Progress files of a generation's tasks, in task order."""
        folder = self.selfplay(generation) / "progress"
        return sorted(folder.glob("task-[0-9][0-9][0-9][0-9].json")) if folder.is_dir() else []

    @classmethod
    def of_checkpoint(cls, checkpoint: Path) -> RunPaths | None:
        """The run folder a network checkpoint belongs to (RUN/models/gen-NNNN.pt with RUN/config.yaml), else None."""
        checkpoint = Path(checkpoint).resolve()
        if not _MODEL_RE.match(checkpoint.name) or checkpoint.parent.name != "models":
            return None
        paths = cls(checkpoint.parent.parent)
        return paths if paths.model(int(checkpoint.name[4:8])) == checkpoint and paths.config.is_file() else None


def _complete(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _SHARD_RE.match(p.name)))


@dataclass(frozen=True)
class BenchmarkPaths:
    """A learning benchmark (``azhpc bench learning``): one run folder per arm, and what compares them.

        OUT/benchmark.json            the arms, their CPU budget, the CPU seconds at each generation's end and
                                      the CPU models that finished their generations
        OUT/ladder.json               one Elo ladder over every network of every arm (random = 0)
        OUT/ARM/                      the arm's run folder (RunPaths)
        OUT/plots/elo-per-cpu-hour.png
    """

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    def arm(self, name: str) -> RunPaths:
        return RunPaths(self.root / name)

    @property
    def summary(self) -> Path:
        return self.root / "benchmark.json"

    @property
    def ladder(self) -> Path:
        return self.root / "ladder.json"

    @property
    def plot(self) -> Path:
        return self.root / "plots" / "elo-per-cpu-hour.png"


def newest_run(root: Path = DEFAULT_ROOT) -> Path | None:
    """The run folder under ``root`` whose config was written last, or None."""
    runs = sorted(root.glob("*/config.yaml"), key=lambda p: p.stat().st_mtime)
    return runs[-1].parent if runs else None
