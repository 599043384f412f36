"""Every path of a run, computed in one place (as minigo's fsdb). Names sort by generation and index.

    RUN/config.yaml                                     resolved config, written once
    RUN/models/gen-0003.pt                              network that generation 3's self-play uses
    RUN/selfplay/gen-0003/task-0001/shard-00002.h5      training rows (docs/shard-format.md)
    RUN/selfplay/gen-0003/task-0001/shard-00002.json    sidecar: row count and stats; marks the shard complete
    RUN/selfplay/gen-0003/task-0001/shard-00002.pgn     a sample of the shard's games
    RUN/selfplay/gen-0003/progress/task-0001.json       live progress of the task
    RUN/train/gen-0004/                                 training that writes models/gen-0004.pt
    RUN/train/gen-0004/progress.json                    that training job's status, attempt and error
    RUN/eval/ledger.jsonl                               one line per evaluation match (azhpc evaluate)
    RUN/eval/gen-0003/vs-random-s0.pgn                  that match's games
    RUN/launch.json                                     how the run was launched, every job id (azhpc launch)
    RUN/logs/                                           job logs (submitit, local stage processes)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path("scratch")
_SHARD_RE = re.compile(r"^shard-(\d{5})\.json$")


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

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    @property
    def ledger(self) -> Path:
        return self.eval_dir / "ledger.jsonl"

    def eval_pgn(self, generation: int, name: str) -> Path:
        return self.eval_dir / f"gen-{generation:04d}" / f"{name}.pgn"

    @property
    def launch_record(self) -> Path:
        return self.root / "launch.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def complete_shards(self, generation: int, task: int) -> list[int]:
        """Shard indices of a task whose sidecar exists (a sidecar is written after its shard)."""
        folder = self.task_dir(generation, task)
        if not folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _SHARD_RE.match(p.name)))

    def generations(self) -> list[int]:
        folder = self.root / "selfplay"
        if not folder.is_dir():
            return []
        return sorted(int(p.name[4:]) for p in folder.glob("gen-[0-9][0-9][0-9][0-9]"))
