"""The evaluation ledger: RUN/eval/ledger.jsonl, one JSON object per finished match.

Appending takes an exclusive lock on a side file (several evaluation jobs may finish at once) and
rewrites the whole ledger atomically, so a reader or a killed writer never leaves a torn line. A match
is identified by its ``key`` (players, games, simulations, openings, seed); an entry is never appended
twice, so a requeued evaluation job finds its result instead of counting it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, TypedDict, cast

from ..store import atomic
from ..errors import RunDirError, describe_os_error, no_locks
from ..store.paths import RunPaths

if TYPE_CHECKING:
    from ..config import Config

LEDGER_SCHEMA = 1


class LedgerEntry(TypedDict, total=False):
    """One finished match, a line of the ledger (``evaluate.runner.play_recorded`` writes it; keys marked optional are
    present only when they apply). Elo figures are the first player's, null when unbounded (the score says which way)."""

    schema: int  # LEDGER_SCHEMA
    key: str  # the match's identity: players, games, simulations, openings, seed (never appended twice)
    player: str  # gen:K, or an opponent spec (a ladder calibration's rung)
    opponent: str  # an opponent spec: previous, gen:K, random, greedy, stockfish:..., fairy-stockfish:...
    generation: int  # the network generation that played (-1: none, an engine pair)
    simulations: int  # the network's simulations per move
    openings: str  # book, or random:K
    seed: int
    max_plies: int
    adjudicate_material: int  # > 0: draws by rule with this much material ahead scored as wins
    rules_only: dict  # optional, with adjudicate_material: the same games' score under chess rules only
    mate_in_one: bool  # optional, true when the network's search proved mates in one (mcts.mate_in_one)
    leaf_capture_value: float  # optional, the network's search's mcts.leaf_capture_value when not 0
    search: str  # optional, the network's search algorithm where eval.algorithm overrode the run's (azhpc elo: gen:K@puct400)
    policy_temperature: float  # optional, the network's prior temperature at play when not 1 (eval.policy_temperature)
    tree_reuse: bool  # optional, true when the network kept each game's tree between its moves (eval.tree_reuse)
    precision: str  # optional, "int8" when the network played quantized (mcts.precision: int8): another player
    wins: int  # the first player's, over ``games``
    draws: int
    losses: int
    games: int
    score: float  # (wins + draws / 2) / games
    elo: float | None
    elo_low: float | None  # 95% interval
    elo_high: float | None
    los: float  # likelihood of superiority
    mean_plies: float
    terminations: dict[str, int]  # how the games ended, counted (game.rules' names; ADJUDICATED ones prefixed)
    clock_overruns: int  # optional: moves of a timed engine that overran its clock
    engine_per_game: bool  # optional (since 2026-12-04), true when an engine searching beyond depth 1 played each game
    # in its own process (evaluate.engines.EnginePlayer); before, one process answered every game of the block in turn
    seconds: float  # the match's wall time
    pgn: str  # the games, relative to the run folder
    load_average: list[float]  # 1-minute load at the start and the end: timed engines weaken with it
    finished: str  # ISO time
    host: str
    cpu: str  # optional (recorded since 2026-12-02): the CPU model that played the match; timed rungs depend on it
    slurm_job_id: str | None


@dataclass(frozen=True)
class PlaySetup:
    """How the network players of a match searched (simulations, the mate proof, leaf capture values, eval.algorithm
    where it is not the run's, the prior's temperature, tree reuse, an int8 network): what makes ``gen:K`` in two
    ledger entries the same player.
    A match's plan holds one (``runner.MatchPlan``), and its key and ledger entry name it (``key_flags``,
    ``entry_fields``)."""
    simulations: int
    mate_in_one: bool = False
    leaf_capture_value: float = 0.0
    search: str = ""
    policy_temperature: float = 1.0
    tree_reuse: bool = False
    int8: bool = False  # mcts.precision: int8, the network quantized (net/quantize.py): its moves differ from float's

    @classmethod
    def of_entry(cls, entry: Mapping[str, Any]) -> PlaySetup:
        return cls(int(entry.get("simulations", 0)), bool(entry.get("mate_in_one")),
                   float(entry.get("leaf_capture_value", 0.0)), str(entry.get("search", "")),
                   float(entry.get("policy_temperature", 1.0)), bool(entry.get("tree_reuse")),
                   entry.get("precision") == "int8")

    @classmethod
    def of_config(cls, cfg: Config, simulations: int | None = None) -> PlaySetup:
        """How ``cfg``'s networks play: at ``simulations``, else its play_simulations."""
        return cls(simulations or cfg.play_simulations, cfg.mcts.mate_in_one, cfg.mcts.leaf_capture_value, cfg.play_search,
                   cfg.play_temperature, cfg.eval.tree_reuse, cfg.mcts.precision == "int8")

    def key_flags(self) -> str:
        """The end of a match's ledger key that names this setup beyond its simulations: "" at the defaults, so the
        keys of matches recorded before a field existed stay as they were."""
        return (("|mate_in_one" if self.mate_in_one else "")
                + (f"|leaf_capture={self.leaf_capture_value:g}" if self.leaf_capture_value else "")
                + (f"|search={self.search}" if self.search else "")
                + (f"|policy_temperature={self.policy_temperature:g}" if self.policy_temperature != 1.0 else "")
                + ("|tree_reuse" if self.tree_reuse else "") + ("|int8" if self.int8 else ""))

    def entry_fields(self) -> dict[str, Any]:
        """This setup's fields of a ledger entry beyond its simulations, each only where it is not the default
        (``of_entry`` reads them back)."""
        return {**({"mate_in_one": True} if self.mate_in_one else {}),
                **({"leaf_capture_value": self.leaf_capture_value} if self.leaf_capture_value else {}),
                **({"search": self.search} if self.search else {}),
                **({"policy_temperature": self.policy_temperature} if self.policy_temperature != 1.0 else {}),
                **({"tree_reuse": True} if self.tree_reuse else {}),
                **({"precision": "int8"} if self.int8 else {})}


def search_tag(entry: LedgerEntry, cfg: Config | None = None) -> str:
    """How a network searched in the match ``entry`` where that is not its run's own way to play (``cfg``, the
    run's config: eval.algorithm at its play_simulations, its mate proof, leaf capture values, prior temperature and
    tree reuse): ``puct400``, ``gumbel2,nomate``, ``puct800,T=3,reuse``; "" for the run's own. Without ``cfg`` only
    another algorithm than the run's, a prior temperature other than 1 and tree reuse count."""
    setup = PlaySetup.of_entry(entry)
    if cfg is None:
        tag = f"{setup.search}{setup.simulations}" if setup.search else ""
        temperature = f"T={setup.policy_temperature:g}" if setup.policy_temperature != 1.0 else ""
        return ",".join(t for t in (tag, temperature, "reuse" if setup.tree_reuse else "", "int8" if setup.int8 else "") if t)
    own = PlaySetup.of_config(cfg)
    if setup == own:
        return ""
    return (f"{setup.search or cfg.mcts.algorithm}{setup.simulations}"
            + ((",mate" if setup.mate_in_one else ",nomate") if setup.mate_in_one != own.mate_in_one else "")
            + (f",capture={setup.leaf_capture_value:g}" if setup.leaf_capture_value != own.leaf_capture_value else "")
            + (f",T={setup.policy_temperature:g}" if setup.policy_temperature != own.policy_temperature else "")
            + ((",reuse" if setup.tree_reuse else ",noreuse") if setup.tree_reuse != own.tree_reuse else "")
            + ((",int8" if setup.int8 else ",float") if setup.int8 != own.int8 else ""))


@contextlib.contextmanager
def _locked(paths: RunPaths) -> Iterator[None]:
    lock = paths.ledger_lock
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a")
    except OSError as exc:
        raise describe_os_error(exc, lock, "locking the evaluation ledger") from exc
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError as exc:
            raise no_locks(lock, exc) from exc
        yield


def read_ledger(paths: RunPaths) -> list[LedgerEntry]:
    """Every entry, oldest first; a line that does not parse is reported, not skipped silently."""
    ledger = paths.ledger
    try:
        text = ledger.read_text()
    except FileNotFoundError:
        return []
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{ledger} line {n} is not JSON ({exc.msg}): fix or delete that line") from exc
        if not isinstance(entry, dict) or entry.get("schema") != LEDGER_SCHEMA or "key" not in entry:
            raise RunDirError(f"{ledger} line {n} is not an azhpc ledger entry of schema {LEDGER_SCHEMA}: delete that line")
        entries.append(cast(LedgerEntry, entry))
    return entries


def find_entry(paths: RunPaths, key: str) -> LedgerEntry | None:
    return next((e for e in read_ledger(paths) if e["key"] == key), None)


def append_entry(paths: RunPaths, entry: LedgerEntry) -> bool:
    """Add ``entry`` unless one with its key is there; returns whether it was added."""
    entry = LedgerEntry(schema=LEDGER_SCHEMA, **entry)
    with _locked(paths):
        entries = read_ledger(paths)
        if any(e["key"] == entry["key"] for e in entries):
            return False
        lines = [json.dumps(e, sort_keys=True) for e in entries + [entry]]
        atomic.write_text(paths.ledger, "\n".join(lines) + "\n", doing="appending to the evaluation ledger")
    return True
