"""An import task: its share of the input games, as shards under ``RUN/import/task-T/``.

Task I of T takes the games numbered I, I + T, I + 2T, ... of the input (all files in the order given, numbered
from 0; the other games are skipped at python-chess's fast path, unparsed) and, with ``max_games`` N, at most
its share of N accepted games. Every ``games_per_shard`` accepted games make a shard; its sidecar
records where in the input the shard ends and the counts so far, so a task killed at any moment and started
again continues after its last complete shard and writes exactly what an uninterrupted run would. What the
import reads (files, filters, tasks) is fixed by ``RUN/import/import.json`` at its first start.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import chess.pgn

from ..cluster.preempt import Deadline, Stop
from ..config import Config
from ..errors import AzhpcError, RunDirError, ShardError, ShardSchemaError, failure_line
from ..store import atomic
from ..store.paths import RunPaths
from ..store.progress import ImportProgress, Status, check_stalled, read_import_progress, slice_ended, stalled_slices
from ..store.runconfig import resolve_run_config
from ..store.shards import ShardStats, Sidecar, read_sidecar, write_shard, write_sidecar
from .rows import GameFilter, GameRows, RowVisitor, game_arrays
from .source import STREAM_ERRORS, ExpansionError, PgnFileError, open_games, open_pgn

KEEP_MALFORMED = 10  # game numbers (and errors) of malformed games kept for the report


@dataclass(frozen=True)
class ImportSpec:
    """What an import reads; fixed at its first start (``RUN/import/import.json``)."""

    files: tuple[str, ...]  # absolute paths, in order
    sizes: tuple[int, ...]  # their sizes when the import began: a file that changed would shift every game
    tasks: int
    max_games: int  # accepted games in all, split over the tasks; 0: every game
    min_elo: int
    speeds: tuple[str, ...]
    ending: str
    games_per_shard: int = 100  # accepted games per shard (bigger than self-play's: a shard costs a few ms to write)

    @property
    def filter(self) -> GameFilter:
        return GameFilter(self.min_elo, self.speeds, self.ending)

    def quota(self, task: int) -> int:
        """Accepted games task ``task`` keeps (0: no limit)."""
        if not self.max_games:
            return 0
        return self.max_games // self.tasks + (1 if task < self.max_games % self.tasks else 0)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ImportSpec:
        return cls(tuple(data["files"]), tuple(data["sizes"]), int(data["tasks"]), int(data["max_games"]),
                   int(data["min_elo"]), tuple(data["speeds"]), str(data["ending"]), int(data["games_per_shard"]))

    @classmethod
    def of(cls, files: Sequence[str | Path], tasks: int = 1, max_games: int = 0, game_filter: GameFilter = GameFilter(),
           games_per_shard: int = 100) -> ImportSpec:
        if not files:
            raise AzhpcError("no PGN file given: azhpc import-pgn RUN FILE [FILE ...]")
        paths = [Path(f).resolve() for f in files]
        sizes = []
        for path in paths:
            try:
                sizes.append(path.stat().st_size)
            except FileNotFoundError as exc:
                raise PgnFileError(f"{path}: no such file; check the path") from exc
        if tasks < 1:
            raise AzhpcError(f"--tasks {tasks}: must be at least 1")
        if max_games < 0:
            raise AzhpcError(f"--max-games {max_games}: must be 0 (every game) or more")
        if games_per_shard < 1:
            raise AzhpcError(f"--games-per-shard {games_per_shard}: must be at least 1")
        if game_filter.ending not in ("result", "rules"):
            raise AzhpcError(f"--ending {game_filter.ending}: must be result or rules")
        return cls(tuple(map(str, paths)), tuple(sizes), tasks, max_games, game_filter.min_elo,
                   tuple(sorted(game_filter.speeds)), game_filter.ending, games_per_shard)


def fix_spec(paths: RunPaths, spec: ImportSpec) -> None:
    """Write the import's spec at its first start; afterwards refuse anything that would read other games."""
    try:
        stored = atomic.read_json(paths.import_spec)
    except FileNotFoundError:
        for path in spec.files:  # every file looks like PGN before a game of the first one is imported
            open_pgn(Path(path)).close()
        atomic.write_json(paths.import_spec, spec.to_json(), doing="writing the import spec")
        return
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{paths.import_spec} is unreadable ({exc}): delete {paths.imports} to import again") from exc
    if stored != json_roundtrip(spec.to_json()):
        diff = [k for k in spec.to_json() if json_roundtrip(spec.to_json())[k] != stored.get(k)]
        raise RunDirError(f"{paths.root} already imports other games ({', '.join(diff)} differ from {paths.import_spec}): "
                          f"rerun with the same files and options, or delete {paths.imports} to import anew")


def read_spec(paths: RunPaths) -> ImportSpec:
    """The import's spec, as its first start fixed it; RunDirError when there is none."""
    try:
        return ImportSpec.from_json(atomic.read_json(paths.import_spec))
    except FileNotFoundError as exc:
        raise RunDirError(f"{paths.root} has no imported games ({paths.import_spec} is missing): run "
                          f"azhpc import-pgn {paths.root} FILE ... first") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunDirError(f"{paths.import_spec} is unreadable ({exc}): delete {paths.imports} to import again") from exc


def import_state(paths: RunPaths) -> tuple[ImportSpec, list[int]]:
    """(the spec, tasks not done yet) of the run's import."""
    spec = read_spec(paths)
    todo = []
    for task in range(spec.tasks):
        p = read_import_progress(paths.import_progress(task))
        if p is None or p.status != "done":
            todo.append(task)
    return spec, todo


def json_roundtrip(data: dict) -> dict:
    import json

    return json.loads(json.dumps(data))


def _cursor(paths: RunPaths, task: int) -> tuple[list[int], dict]:
    """(complete shards, the last one's source record) of an import task."""
    done = paths.import_complete_shards(task)
    if not done:
        return [], {}
    if done != list(range(len(done))):
        raise RunDirError(f"{paths.import_task_dir(task)} has shards {done}, not 0..{len(done) - 1}: delete the folder "
                          "and rerun the task")
    try:
        last = read_sidecar(paths.import_sidecar(task, done[-1]))
    except ShardSchemaError:
        raise
    except ShardError as exc:
        raise RunDirError(f"{exc}: delete it and its shard, and rerun the task") from exc
    return done, last.source


class _Task:
    def __init__(self, paths: RunPaths, cfg: Config, spec: ImportSpec, task: int, deadline: Deadline | None) -> None:
        self.paths, self.cfg, self.spec, self.task = paths, cfg, spec, task
        self.deadline = deadline or Deadline(None)
        self.history = cfg.model.history
        self.per_shard = spec.games_per_shard
        done, source = _cursor(paths, task)
        previous = read_import_progress(paths.import_progress(task))
        p = ImportProgress(task, spec.tasks, attempt=(previous.attempt + 1) if previous else 1)
        p.shards_done = len(done)
        p.next_game = int(source.get("next_game", 0))
        p.games = int(source.get("games", 0))
        p.positions = int(source.get("positions", 0))
        p.rejected = dict(source.get("rejected", {}))
        p.malformed = int(source.get("malformed", 0))
        p.malformed_games = list(source.get("malformed_games", []))
        p.malformed_errors = list(source.get("malformed_errors", []))
        p.start_mark = len(done)
        if previous is not None and previous.status != "done":  # a slice that ended without a new shard counts
            p.stalled = stalled_slices(previous.start_mark, previous.stalled, len(done))
        self.last = slice_ended(previous.status, previous.error) if previous is not None else ""  # for the stall line
        self.p = p
        self.games: list[GameRows] = []  # accepted, not yet in a shard
        self.pending: dict = {"rejected": {}, "malformed": 0, "games": [], "errors": []}
        self._t0 = time.time()
        self._positions0 = p.positions

    # -- counting ------------------------------------------------------------------------------------------
    def _count(self, number: int, rows: GameRows) -> None:
        p = self.p
        if rows.malformed:
            p.malformed += 1
            if len(p.malformed_games) < KEEP_MALFORMED:
                p.malformed_games.append(number + 1)
                p.malformed_errors.append(rows.malformed)
        elif rows.rejected:
            p.rejected[rows.rejected] = p.rejected.get(rows.rejected, 0) + 1
        else:
            self.games.append(rows)

    def _source(self, next_game: int) -> dict:
        p = self.p
        return {"kind": "pgn", "next_game": next_game, "games": p.games, "positions": p.positions,
                "rejected": dict(p.rejected), "malformed": p.malformed, "malformed_games": list(p.malformed_games),
                "malformed_errors": list(p.malformed_errors)}

    def _write_shard(self, next_game: int) -> None:
        p = self.p
        shard = p.shards_done
        first_id = p.games
        arrays = game_arrays(self.games, self.history, first_id)
        rows = len(arrays["value_target"])
        attrs = {"source": "pgn", "policy_target": "played_move", "task": self.task, "history": self.history,
                 "config_sha256": self.cfg.digest(), "games_per_shard": self.per_shard, "shard": shard,
                 "games": len(self.games)}
        size = write_shard(self.paths.import_shard(self.task, shard), arrays, attrs, self.cfg.selfplay.shard_compression)
        p.games += len(self.games)
        p.positions += rows
        p.shards_done += 1
        terms: dict[str, int] = {}
        for g in self.games:
            terms[g.termination] = terms.get(g.termination, 0) + 1
        stats = ShardStats(plies=rows, white_wins=sum(g.result == 1 for g in self.games), draws=sum(g.result == 0 for g in self.games),
                           black_wins=sum(g.result == -1 for g in self.games), terminations=terms)
        write_sidecar(self.paths.import_sidecar(self.task, shard), Sidecar(
            generation=0, task=self.task, shard=shard, games=len(self.games), rows=rows, bytes=size,
            bytes_per_position=size / max(rows, 1), policy_entries=rows, stats=stats, source=self._source(next_game)))
        self.games = []
        self._progress(next_game)

    def _progress(self, next_game: int, status: Status = "running") -> None:
        p = self.p
        p.next_game, p.status = next_game, status
        p.elapsed_s = time.time() - self._t0
        p.positions_per_s = (p.positions - self._positions0) / max(p.elapsed_s, 1e-9)
        p.write(self.paths.import_progress(self.task))

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self) -> ImportProgress:
        spec, task, p = self.spec, self.task, self.p
        quota = spec.quota(task)
        start = p.next_game  # games before it are in complete shards, or not this task's
        number = 0
        self._progress(start)
        visitor = lambda: RowVisitor(spec.filter, self.history)  # noqa: E731
        for path in spec.files:
            with open_games(Path(path)) as handle:
                while True:
                    if quota and p.games + len(self.games) >= quota:
                        break
                    mine = number >= start and number % spec.tasks == task
                    handle.start_game()
                    try:
                        # GameText has the readline python-chess reads games with; it is not a TextIO
                        rows = chess.pgn.read_game(handle, Visitor=visitor) if mine else None  # type: ignore[call-overload]
                        found = rows is not None if mine else chess.pgn.skip_game(handle)  # type: ignore[arg-type]
                    except STREAM_ERRORS as exc:
                        if self.games:  # the accepted games read so far go into a complete shard first
                            self._write_shard(number)
                        if isinstance(exc, ExpansionError):
                            raise PgnFileError(f"{path}: stopped at game {number + 1} of the input: {exc}; the games "
                                               "before it are imported") from exc
                        raise PgnFileError(f"{path}: damaged after game {number} of the input ({exc}); the games before "
                                           "it are imported; repair or re-download the file to import the rest") from exc
                    if not found:
                        break
                    if mine:
                        assert rows is not None  # found
                        if handle.oversized or handle.flaw:  # the cause of whatever python-chess then made of it
                            rows.malformed = handle.oversized or handle.flaw
                        self._count(number, rows)
                    number += 1
                    if len(self.games) == self.per_shard:
                        self._write_shard(number)
                        if self._should_stop():
                            self._progress(number, "stopped")
                            return p
            if quota and p.games + len(self.games) >= quota:
                break
        if self.games:
            self._write_shard(number)
        self._progress(max(number, start), "done")
        return p

    def _should_stop(self) -> bool:
        if Stop.reason:
            self.p.error = Stop.reason
            return True
        if self.deadline.remaining() < self.cfg.slurm.stop_margin_s:
            self.p.error = f"time limit: {self.deadline.remaining():.0f} s left (slurm.stop_margin_s {self.cfg.slurm.stop_margin_s} s)"
            return True
        return False


def run_import_task(run_dir: str | Path, spec: ImportSpec, task: int = 0, config_path: str | Path | None = None,
                    overrides: Sequence[str] = (), deadline: Deadline | None = None) -> ImportProgress:
    """Import task ``task`` of ``spec.tasks``: its missing shards. Returns its progress (status done or stopped)."""
    if not 0 <= task < spec.tasks:
        raise AzhpcError(f"--task {task}: must be in 0..{spec.tasks - 1} for --tasks {spec.tasks}")
    paths = RunPaths(Path(run_dir))
    cfg = resolve_run_config(paths, config_path, overrides)
    fix_spec(paths, spec)
    for path, size in zip(spec.files, spec.sizes):
        now = os.stat(path).st_size if os.path.exists(path) else -1
        if now != size:
            raise PgnFileError(f"{path} changed since the import began ({size} bytes then, {now} now): restore it, or "
                               f"delete {paths.imports} to import anew")
    previous = read_import_progress(paths.import_progress(task))
    if previous is not None and previous.status == "done" and previous.shards_done == len(paths.import_complete_shards(task)):
        return previous  # finished before: nothing to read again
    t = _Task(paths, cfg, spec, task, deadline)
    try:
        check_stalled(f"import task {task}", t.p.stalled, cfg.slurm.max_attempts, f"{t.p.shards_done} shards",
                      "a shard must fit in one slice: lower --games-per-shard or raise slurm.selfplay_time_min; the job "
                      "logs say what stopped each slice", t.last)
        return t.run()
    except BaseException as exc:
        t.p.status, t.p.error = "failed", failure_line(exc)
        try:
            t.p.write(paths.import_progress(task))
        except Exception:  # noqa: BLE001 - the first error matters more
            pass
        raise


def import_totals(paths: RunPaths) -> tuple[int, int, int]:
    """(games, positions, shards) of the complete imported shards, from their sidecars."""
    games = positions = shards = 0
    for sidecar in paths.import_sidecars():
        shards += 1
        try:
            meta = read_sidecar(sidecar)
        except ShardError:
            continue
        games += meta.games
        positions += meta.rows
    return games, positions, shards

