"""A calibrated rating scale: a frozen ladder of opponents from ``random`` up to Stockfish 15.1 at ``UCI_Elo`` 1350.

The rungs (``RUNGS``, weakest first) are plain opponent specs: ``random``, ``greedy``, Fairy-Stockfish at negative
skill levels searching one ply, Stockfish at skill 0 searching one ply, and the anchor, Stockfish with
``UCI_LimitStrength`` at ``UCI_Elo`` 1350 on a 60+0.6 clock, the time control its Elo was calibrated at. The
anchor is pinned at 1350; every other rung's rating comes from matches between rungs (``calibrate``: adjacent and
next-adjacent pairs, in blocks that are ledger entries, so a calibration resumes where it stopped) and one joint
maximum-likelihood fit (``fit_scale``). ``freeze`` writes the fitted table, with its provenance, into the package
(``scale.json``), where ``load_scale`` finds it.

A network is rated on the scale by matches against the rungs (``rate_on_scale``), fitted with the rungs
pinned at their calibrated ratings and their uncertainty carried into the network's interval, with the covariances
between rungs that one calibration chain gives them (``rung_correlations``, from the table's pairs). Ratings are
relative to the anchor: its own uncertainty (the Stockfish team's calibration, re-measured at 1320 +- 33 in 2023)
and the offset of that calibration to CCRL are not in the intervals; ``ANCHOR_NOTE`` says so wherever a scale
rating is printed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..config import Config
from ..errors import AzhpcError, report
from ..store import atomic
from ..store.paths import RunPaths
from .elo import Z95, MatchScore, fit_ratings, pair_residuals, rating_covariance
from .engines import ENGINES, engine_version, is_engine_spec, parse_engine, plays_per_game
from .ledger import LedgerEntry, PlaySetup, find_entry, read_ledger
from .match import book_openings
from .runner import MatchPlan, RecordingPool, play_recorded

RUNGS: tuple[str, ...] = (
    "random",
    "fairy-stockfish:skill=-12,depth=1",
    "fairy-stockfish:skill=-8,depth=1",
    "greedy",
    "fairy-stockfish:skill=-4,depth=1",
    "fairy-stockfish:skill=-3,depth=1",
    "fairy-stockfish:skill=-2,depth=1",
    "fairy-stockfish:skill=-1,depth=1",
    "stockfish:skill=0,depth=1",
    # Stockfish skill 0 at 100 ms a move was a rung until 2026-12-04 and is no longer: its games closed a loop with
    # the anchor and depth 1 that the direct games contradict (the anchor ~+100 over depth 1 in the package's 160
    # games and ~+175 outside, ~0 through 100 ms; docs/evaluation-log.md, "The top link re-frozen"). The networks play the
    # rungs at and below depth 1, so the anchor is tied to them directly (depth 1 and Fairy-Stockfish -1), and the
    # scale has one rung that rests on the CPU's speed instead of two. Its games stay in the calibration's ledger.
    "stockfish:elo=1350,tc=60+0.6",
)
ANCHOR = RUNGS[-1]
ANCHOR_ELO = 1350.0
SCALE_NAME = "Stockfish 15.1 UCI_Elo scale"
ANCHOR_NOTE = ("relative to the anchor, Stockfish 15.1 at UCI_Elo 1350 on a 60+0.6 clock; the anchor's own "
               "calibration (re-measured at 1320 +- 33 in 2023, against CCRL 40/4-anchored engines) is not included")
MAX_PLIES = 400  # a game still going after this many plies is a draw (chess rules only, no adjudication)
SCALE_FILE = "scale.json"
SCHEMA = 1


def rung_timed(spec: str) -> bool:
    """The rung's strength rests on a time limit, so on the CPU it runs on."""
    return is_engine_spec(spec) and parse_engine(spec).timed


def has_engine_rung(names: Iterable[str]) -> bool:
    """Whether any of ``names`` is an engine rung of the scale. random and greedy are rungs too, but matches against
    only those keep the plain ladder (random = 0)."""
    return any(n in RUNGS and is_engine_spec(n) for n in names)


def rung_clocked(spec: str) -> bool:
    """The rung plays on a real clock (a game takes about two of its base times)."""
    return is_engine_spec(spec) and parse_engine(spec).tc is not None


# -- calibration -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationSpec:
    games: int = 400  # per adjacent pair of untimed rungs; next-adjacent pairs play half
    timed_games: int = 100  # per adjacent pair with a timed rung (movetime, clock); next-adjacent: half
    block: int = 20  # games per ledger entry (even: each opening with both colours)
    timed_block: int = 10  # games per ledger entry of a pair with a clock rung (a game there takes about a minute)
    rungs: tuple[str, ...] = RUNGS  # the rungs to calibrate, weakest first (a subset: a trial or a test)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rungs", tuple(self.rungs))  # JSON hands a list back
        if len(self.rungs) < 2:
            raise AzhpcError("a calibration needs at least two rungs")
        for r in self.rungs:
            if r not in ("random", "greedy"):
                parse_engine(r)


def calibration_plans(spec: CalibrationSpec) -> list[MatchPlan]:
    """Every block of every pair of ``spec.rungs``, cheapest pairs first: adjacent pairs (k, k+1) and next-adjacent
    (k, k+2); the stronger rung is the first player. Block b plays the book from opening b * block / 2 on."""
    rungs = spec.rungs
    plans = []
    book = len(book_openings())
    for gap in (1, 2):
        for k in range(len(rungs) - gap):
            lo, hi = rungs[k], rungs[k + gap]
            total = (spec.timed_games if rung_timed(lo) or rung_timed(hi) else spec.games) // gap
            block = spec.timed_block if rung_clocked(lo) or rung_clocked(hi) else spec.block
            for b in range(max(1, math.ceil(total / block))):
                plans.append(MatchPlan(hi, lo, block, PlaySetup(0), f"book:{(b * block // 2) % book}", b, MAX_PLIES))

    def cost(p: MatchPlan) -> tuple[bool, bool, int]:
        pair = (p.player, p.opponent)
        return any(map(rung_timed, pair)), any(map(rung_clocked, pair)), p.seed
    return sorted(plans, key=cost)


def calibrate_task(out: Path, spec: CalibrationSpec, task: int, tasks: int, engines: dict[str, str | None] | None = None,
                   echo: Callable[[str], None] = print) -> int:
    """Play task ``task``'s share of the calibration's blocks not yet in OUT's ledger (``task_blocks``); returns the
    blocks played. Killed, it loses only the block it was playing."""
    paths = RunPaths(out)
    cfg = Config()
    played = 0
    for plan in task_blocks(paths, spec, task, tasks):
        entry, now = play_recorded(paths, cfg, plan, "cpu", engines)
        played += now
        echo(f"[task {task}] {plan.player} vs {plan.opponent} block {plan.seed}: +{entry['wins']} ={entry['draws']} "
             f"-{entry['losses']} ({entry['seconds']} s)")
    return played


def task_blocks(paths: RunPaths, spec: CalibrationSpec, task: int, tasks: int) -> Iterator[MatchPlan]:
    """The blocks task ``task`` of ``tasks`` plays: every ``tasks``-th of those missing from the ledger when it
    starts (so a resumed calibration splits what is left evenly, not what the whole plan had), then, its share done,
    any block still missing, from the end of the plan, that no other task took. A block is taken by creating its
    claim file (``OUT/eval/claims``, cleared when a calibration is launched) unless another task's is there, so two
    tasks do not play one block; should they anyway (tasks that started at different times, a launch beside a
    running one), the ledger keeps it once."""
    claims = paths.eval_claims
    claims.mkdir(parents=True, exist_ok=True)
    done = {e["key"] for e in read_ledger(paths)}
    missing = [p for p in calibration_plans(spec) if p.key not in done]
    own = missing[task::tasks]
    for plan in own + [p for p in reversed(missing) if p not in own]:
        if _claim(claims, plan.key, task) and find_entry(paths, plan.key) is None:
            yield plan


def _claim(claims: Path, key: str, task: int) -> bool:
    """Take the block ``key`` for ``task``: True if its claim file is new or already this task's (a task requeued
    after a preemption takes its own block again)."""
    path = claims / hashlib.sha1(key.encode()).hexdigest()
    try:
        with open(path, "x") as f:
            f.write(f"{task}\n")
        return True
    except FileExistsError:
        try:
            return path.read_text().strip() == str(task)
        except OSError:
            return False


def calibrate(out: Path, spec: CalibrationSpec, tasks: int, engines: dict[str, str | None] | None = None,
              echo: Callable[[str], None] = print) -> list[str]:
    """Run the calibration's ``tasks`` tasks as local processes (``python -m alphazero_hpc.evaluate.scale``), all
    at once; returns one line per task that failed. Started again, it plays only the blocks still missing."""
    import subprocess
    import sys

    paths = _prepare(out, spec)
    procs = []
    for t in range(tasks):
        cmd = [sys.executable, "-m", "alphazero_hpc.evaluate.scale", str(out), str(t), str(tasks), json.dumps(spec.__dict__),
               json.dumps(engines or {})]
        log = open(paths.stage_log(f"calibrate-task{t:04d}"), "ab")
        procs.append((t, log, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})))
    failed = []
    try:
        for t, log, proc in procs:
            proc.wait()
            log.close()
            if proc.returncode != 0:
                failed.append(f"calibration task {t}: exit status {proc.returncode} (log {paths.stage_log(f'calibrate-task{t:04d}')})")
    finally:
        for _, _, proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
    echo(f"calibration in {paths.ledger}: {len(read_ledger(paths))} blocks played")
    return failed


def _prepare(out: Path, spec: CalibrationSpec) -> RunPaths:
    paths = RunPaths(out)
    paths.logs.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(paths.eval_claims, ignore_errors=True)  # a new launch: the blocks still missing are free
    atomic.write_json(paths.calibration_plan, {"schema": SCHEMA, **spec.__dict__, "rungs": list(spec.rungs)},
                      doing="writing the calibration plan")
    return paths


def submit_calibration(out: Path, spec: CalibrationSpec, tasks: int, engines: dict[str, str | None] | None = None,
                       time_min: int = 240, partition: str = "", account: str = "", qos: str = "") -> str:
    """The calibration as a SLURM array of ``tasks`` one-CPU tasks (submitit), each playing its share of the blocks
    not yet in the ledger; returns the array's job id. A task stopped by its time limit or a preemption loses only
    the block it was playing: submitting again plays the rest (blocks already in the ledger are never counted
    twice, even if two tasks played one)."""
    import submitit

    paths = _prepare(out, spec)
    ex = submitit.SlurmExecutor(folder=paths.logs.resolve() / "%j")
    params: dict[str, Any] = {"job_name": "azhpc-calibrate", "time": time_min, "nodes": 1, "ntasks_per_node": 1,
                              "cpus_per_task": 1, "array_parallelism": tasks,
                              "setup": ["export OMP_NUM_THREADS=1"]}
    for key, value in (("partition", partition), ("account", account), ("qos", qos)):
        if value:
            params[key] = value
    ex.update_parameters(**params)
    root = paths.root.resolve()
    try:
        jobs = ex.map_array(calibrate_task, [root] * tasks, [spec] * tasks, list(range(tasks)), [tasks] * tasks,
                            [engines or {}] * tasks)
    except Exception as exc:  # noqa: BLE001 - submitit raises several types for a refused sbatch
        text = " ".join(str(exc).split())
        raise AzhpcError(f"sbatch refused the calibration array: {text[text.find('error:'):][:300]}; check "
                         "--partition/--account/--qos") from exc
    job = jobs[0].job_id.split("_")[0]
    atomic.write_json(paths.calibration_jobs, {"jobs": [job], "tasks": tasks}, doing="recording the calibration job")
    return job


# -- the fit and the shipped table ----------------------------------------------------------------------
def rung_matches(entries: Iterable[LedgerEntry]) -> list[tuple[str, str, MatchScore]]:
    """The matches between rungs, chess rules only; the caller leaves out what its fit does not count (``fit_scale``:
    ``shared_engine_block``), a check of old blocks (docs/calibration/openings_check.py) keeps them."""
    return [(e["player"], e["opponent"], MatchScore(e["wins"], e["draws"], e["losses"])) for e in entries
            if e["player"] in RUNGS and e["opponent"] in RUNGS and not e.get("adjudicate_material", 0)]


def shared_engine_block(entry: LedgerEntry) -> bool:
    """A block in which an engine searching beyond depth 1 answered all the block's games from one process (before
    2026-12-04): its hash and time management carried other games' searches, and the anchor scored 0.61 that way
    against depth 1 where it scored 0.79 one game at a time (docs/evaluation-log.md, "The runner: one engine process per game"). Not a calibration
    game any more."""
    return not entry.get("engine_per_game") and any(map(plays_per_game, (entry["player"], entry["opponent"])))


def counts_in_fit(entry: LedgerEntry, adjudicate_material: int = 0) -> bool:
    """Whether a fit over games scored with ``adjudicate_material`` (0: chess rules only) counts this block: every
    fit of a network (``rate_on_scale``, ``azhpc elo``, ``bench learning``) asks this one question, so a rule for
    leaving blocks out is written once; the calibration's fit (``fit_scale``) leaves out the same shared-engine
    blocks and counts them."""
    return entry.get("adjudicate_material", 0) == adjudicate_material and not shared_engine_block(entry)


def fit_scale(out: Path) -> dict[str, Any]:
    """The joint fit of every rung over the calibration's ledger, anchor at 1350, with provenance. Blocks whose
    engine shared one process among the block's games (``shared_engine_block``) are left out and counted."""
    paths = RunPaths(out)
    both = [e for e in read_ledger(paths) if e["player"] in RUNGS and e["opponent"] in RUNGS]
    entries = [e for e in both if not shared_engine_block(e)]
    matches = rung_matches(entries)
    if not matches:
        raise AzhpcError(f"no calibration matches in {paths.ledger}: run azhpc ladder calibrate {out} first")
    ratings = fit_ratings(matches, ANCHOR, ANCHOR_ELO)
    pairs: dict[tuple[str, str], list[int]] = {}
    for a, b, s in matches:
        acc = pairs.setdefault((a, b), [0, 0, 0])
        acc[0] += s.wins
        acc[1] += s.draws
        acc[2] += s.losses
    rungs = []
    for name in RUNGS:
        r = ratings.get(name)
        rungs.append({"name": name, "elo": None if r is None or r.elo is None else round(r.elo, 1),
                      "low": None if r is None or r.low is None else round(r.low, 1),
                      "high": None if r is None or r.high is None else round(r.high, 1),
                      "games": 0 if r is None else r.games, "timed": rung_timed(name), "clock": rung_clocked(name)})
    loads = [x for e in entries for x in e.get("load_average", [])]
    versions = {}
    for engine in ENGINES:
        try:
            versions[engine] = engine_version(engine)
        except Exception:  # noqa: BLE001 - provenance only: a missing or broken engine is written as such
            versions[engine] = "not found"
    return {
        "schema": SCHEMA, "scale": SCALE_NAME, "anchor": ANCHOR, "anchor_elo": ANCHOR_ELO, "anchor_note": ANCHOR_NOTE,
        "rungs": rungs,
        "pairs": [{"first": a, "second": b, "wins": w, "draws": d, "losses": l} for (a, b), (w, d, l) in sorted(pairs.items())],
        "provenance": {
            "engines": versions, "engine_options": "Threads 1, Hash 16; python-chess driving them; an engine searching "
                                                   "beyond depth 1 in a process of its own for each game",
            "shared_engine_blocks_left_out": len(both) - len(entries),
            "max_plies": MAX_PLIES, "openings": "the shipped book (evaluate/openings.txt), each with both colours",
            "blocks": len(entries), "games": sum(s.games for _, _, s in matches),
            "first": min(e["finished"] for e in entries), "last": max(e["finished"] for e in entries),
            # where the games were played (each block records its CPU), not where the table is fitted
            "cpu": _counted(entries, "cpu"), "host": _counted(entries, "host"),
            "load_average_range": [min(loads), max(loads)] if loads else None,  # timed rungs are weaker on a busy CPU
        },
    }


def _counted(entries: Sequence[LedgerEntry], field: str) -> str:
    """The distinct values of a provenance field over the blocks, with their block counts when there are several;
    blocks from before the field was recorded are counted as such."""
    counts: dict[str, int] = {}
    for e in entries:
        value = str(e.get(field) or f"{field} not recorded")
        counts[value] = counts.get(value, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{value} ({n} block{'' if n == 1 else 's'})" for value, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def freeze(table: dict[str, Any], where: Path | None = None) -> Path:
    """Write ``table`` as the package's shipped scale (or to ``where``)."""
    target = where or Path(str(resources.files(__package__).joinpath(SCALE_FILE)))
    atomic.write_text(target, json.dumps(table, indent=1) + "\n", doing="writing the scale table")
    return target


def write_fit(out: Path, table: dict[str, Any]) -> Path:
    """OUT/scale.json: a calibration's fitted table."""
    atomic.write_text(out / SCALE_FILE, json.dumps(table, indent=1) + "\n", doing="writing the scale table")
    return out / SCALE_FILE


def read_table(path: Path | None = None) -> dict[str, Any]:
    """The shipped table (or the one at ``path``)."""
    try:
        text = path.read_text() if path else resources.files(__package__).joinpath(SCALE_FILE).read_text()
        table = json.loads(text)
    except (OSError, ValueError) as exc:
        raise AzhpcError(f"the scale table {path or SCALE_FILE} cannot be read ({exc}): reinstall azhpc, or calibrate "
                         "one with azhpc ladder calibrate OUT and pass --scale-table OUT/scale.json") from exc
    if not isinstance(table, dict) or table.get("schema") != SCHEMA:
        raise AzhpcError(f"the scale table {path or SCALE_FILE} is not an azhpc scale table of schema {SCHEMA}: "
                         "calibrate it again (azhpc ladder calibrate OUT)")
    return table


def render_table(path: Path | None = None) -> str:
    """The table as text: rungs strongest first (as measured, which need not be the order of ``RUNGS``), then what
    the scale rests on."""
    table = read_table(path)
    lines = [f"{'rung':<36} {'Elo':>6}  {'95% interval':>14}  {'games':>6}  rests on"]
    for r in sorted(table["rungs"], key=lambda r: (r["elo"] is None, -(r["elo"] or 0.0))):  # strongest first, as measured
        elo = "?" if r["elo"] is None else f"{r['elo']:.0f}"
        iv = "(anchor)" if r["name"] == table["anchor"] else ("" if r["low"] is None else f"[{r['low']:.0f}, {r['high']:.0f}]")
        rests = "a clock (CPU speed)" if r["clock"] else "a move time (CPU speed)" if r["timed"] else "search depth / rules"
        lines.append(f"{r['name']:<36} {elo:>6}  {iv:>14}  {r['games']:>6}  {rests}")
    p = table["provenance"]
    lines.append(f"{table['scale']}: {table['anchor']} = {table['anchor_elo']:.0f}, {table['anchor_note']}")
    lines.append(f"{p['games']} games in {p['blocks']} blocks, {p['first'][:10]} to {p['last'][:10]}, on {p['cpu']}; "
                 f"engines: {', '.join(f'{k} = {v}' for k, v in p['engines'].items())}")
    if p.get("shared_engine_blocks_left_out"):
        lines.append(f"left out: {p['shared_engine_blocks_left_out']} blocks whose engine answered every game of the "
                     "block from one process (played before 2026-12-04)")
    return "\n".join(lines + fit_lines(table))


def fit_lines(table: dict[str, Any]) -> list[str]:
    """How well one set of ratings explains the calibration's pairs: the chi-square of their residuals against the
    degrees of freedom, and each pair off by more than 2 standard errors. A misfit is not in the rungs' intervals."""
    ratings = {r["name"]: r["elo"] for r in table["rungs"] if r["elo"] is not None}
    matches = table_matches(table)
    fits = pair_residuals(matches, ratings)
    if not fits:
        return []
    df = len(fits) - (len(ratings) - 1)
    chi2 = sum(f.z * f.z for f in fits)
    out = [f"fit: chi-square {chi2:.1f} on {df} degrees of freedom over {len(fits)} pairs"
           + (" (the model explains the pairs about as well as chance allows)" if chi2 <= df + 2 * math.sqrt(2 * max(df, 1))
              else "; the rungs' intervals hold only the games' chance, not this misfit")]
    for f in sorted(fits, key=lambda f: -abs(f.z)):
        if abs(f.z) > 2:
            out.append(f"  {f.first} - {f.second}: {f.score:.3f} in {f.games} games, the ratings say {f.expected:.3f} "
                       f"({f.z:+.1f} standard errors)")
    return out


@dataclass(frozen=True)
class ScaleRung:
    name: str
    elo: float
    sd: float  # standard deviation relative to the anchor, Elo
    timed: bool
    cov: tuple[tuple[str, float], ...] = ()  # covariance (Elo^2) with each other rung it shares calibration errors with


def load_scale(path: Path | None = None) -> list[ScaleRung]:
    """The shipped (or given) table's rated rungs, weakest first. Each rung's standard deviation is the table's
    interval; its covariances with the other rungs come from the table's calibration pairs (``rung_correlations``):
    the rungs were rated along one chain of matches, so their errors move together."""
    table = read_table(path)
    rated = [r for r in table["rungs"] if r["elo"] is not None]
    sd = {r["name"]: (r["high"] - r["low"]) / (2 * Z95) for r in rated}
    corr = rung_correlations(table)
    out = [ScaleRung(r["name"], r["elo"], sd[r["name"]], r["timed"],
                     tuple((q, round(c * sd[r["name"]] * sd[q], 3)) for (p, q), c in sorted(corr.items())
                           if p == r["name"] and q != p and q in sd and c != 0.0))
           for r in rated]
    return sorted(out, key=lambda r: r.elo)


def table_matches(table: dict[str, Any]) -> list[tuple[str, str, MatchScore]]:
    """A table's calibration pairs as matches (stronger-planned rung first, its W/D/L)."""
    return [(m["first"], m["second"], MatchScore(m["wins"], m["draws"], m["losses"])) for m in table.get("pairs", [])]


def rung_correlations(table: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Correlations of the rungs' calibration errors, every ordered pair of rated rungs but the anchor (exact): the
    joint fit's inverse information over the table's ``pairs``, the same fit that gave the rungs' intervals. Adjacent
    rungs of a chain correlate strongly (0.9 and more between neighbouring Fairy-Stockfish rungs on the shipped table):
    a network rated against two of them moves with their common error, so it does not average out. A table without
    pairs (or an anchor) gives none: its rungs are taken as independent."""
    matches = table_matches(table)
    if not matches or "anchor" not in table:
        return {}
    cov = rating_covariance(matches, table["anchor"], table.get("anchor_elo", 0.0))
    return {(p, q): c / math.sqrt(cov[(p, p)] * cov[(q, q)]) for (p, q), c in cov.items()
            if cov[(p, p)] > 0 and cov[(q, q)] > 0}


def exact(rungs: Iterable[ScaleRung]) -> list[ScaleRung]:
    """The rungs taken as exact (no calibration error): a fit against them gives the part of a player's interval
    that its own games make, the part that more games shrink."""
    return [ScaleRung(r.name, r.elo, 0.0, r.timed) for r in rungs]


def scale_fit(matches: Sequence[tuple[str, str, MatchScore]], rungs: Sequence[ScaleRung]) -> dict[str, Any]:
    """Ratings of the non-rung players of ``matches`` on the scale: every rung pinned at its calibrated rating, its
    calibration error (with the covariances between rungs) carried into the players' intervals."""
    pinned = {r.name: (r.elo, r.sd) for r in rungs}
    cov = {(r.name, q): c for r in rungs for q, c in r.cov}
    # the anchor: the scale's own, else a table's exact rung (its anchor), else the strongest
    anchor = ANCHOR if ANCHOR in pinned else next((r.name for r in rungs if r.sd == 0.0), rungs[-1].name)
    return fit_ratings(matches, anchor, pinned[anchor][0], pinned=pinned, pinned_cov=cov)


# -- rating a player on the scale ------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaleRating:
    player: str
    elo: float
    low: float  # the 95% interval with the rungs' calibration uncertainty carried in
    high: float
    match_half: float  # half-width from the player's own games alone (the rungs taken as exact): what games reduce
    games: int
    games_per_rung: dict[str, int]
    target: float  # the match half-width asked for

    @property
    def half(self) -> float:
        return (self.high - self.low) / 2

    def line(self) -> str:
        reached = "" if self.match_half <= self.target else f"; the +-{self.target:g} asked for was not reached"
        return (f"{self.player}: {self.elo:.0f} on the {SCALE_NAME} [{self.low:.0f}, {self.high:.0f}] (95%: +-{self.match_half:.0f} "
                f"from its {self.games} games against {len(self.games_per_rung)} rungs, +-{self.half:.0f} with the rungs' "
                f"calibration{reached})")


PlayBlock = Callable[[ScaleRung, int, int, int], MatchScore]  # (rung, games, seed, first opening) -> W/D/L
Played = tuple[str, MatchScore] | tuple[str, MatchScore, int]  # (rung, W/D/L[, the block's seed])


def _spread(lo: int, hi: int, jobs: int) -> list[int]:
    """Up to ``jobs`` rung indices strictly between ``lo`` and ``hi``, evenly spaced (one: the middle)."""
    inner = list(range(lo + 1, hi))
    if len(inner) <= jobs:
        return inner
    return sorted({lo + (hi - lo) * (i + 1) // (jobs + 1) for i in range(jobs)})


def climb(player: str, rungs: Sequence[ScaleRung], play_block: PlayBlock,
          played: Sequence[Played] = (), target: float = 75.0, probe: int = 10, block: int = 20,
          max_games: int = 600, echo: Callable[[str], None] = lambda s: None, jobs: int = 1) -> ScaleRating:
    """Rate ``player`` on ``rungs``: bracket it by bisection over the rungs with ``probe``-game blocks, then play
    ``block``-game blocks against the two rungs nearest its estimate (the one with fewer games first) until the
    95% interval from its own games is at most +-``target`` Elo or it has played ``max_games``. The interval
    reported also carries the rungs' calibration uncertainty, which no number of games reduces. ``played``: (rung, W/D/L
    and, where known, the block's seed) of earlier blocks, which count (so an interrupted rating continues);
    ``play_block`` plays one more, with the next seed against its rung (one past the highest) and the book from where
    the games against it so far leave off.

    ``jobs`` > 1 plays up to that many blocks at once (``play_block`` called from as many threads), and nothing
    waits for a round: whenever a block ends, what is known is used and the free processes start the next blocks.
    While the bracket is open they probe the rungs inside it not yet probed, spread over it (the middle first); a
    probe that ends narrows the bracket at once (the rung nearest its middle first when several have games), and a
    probe still in play outside it plays on and counts in the fit. After the bracket the fit is redone and as many
    blocks start, against the two nearest rungs, as the interval still asks for (from how it narrows with games, the
    games still in play counted as if played) and ``jobs`` leaves room for; the one long game of a block no longer
    holds the other cores idle. Every block gets the seed and first opening it would have had played one after
    another, so the blocks in play are distinct ledger entries, also after a rating that was cut short."""
    by_name = {r.name: r for r in rungs}
    history: list[tuple[str, MatchScore]] = []
    next_seed: dict[str, int] = {}
    for name, score, *seed in played:
        if name in by_name:
            history.append((name, score))
            next_seed[name] = max(next_seed.get(name, 0), (seed[0] if seed else next_seed.get(name, 0)) + 1)

    def games_vs(name: str) -> int:
        return sum(s.games for n, s in history if n == name)

    def total() -> int:
        return sum(s.games for _, s in history)

    def claim(rung: ScaleRung, before: int) -> tuple[int, int]:
        """The next block against ``rung``: its seed, and its first opening after the ``before`` games against it
        (those played and those of blocks started before it)."""
        seed = next_seed.get(rung.name, 0)
        next_seed[rung.name] = seed + 1
        return seed, before // 2

    def done(rung: ScaleRung, score: MatchScore) -> None:
        history.append((rung.name, score))
        echo(f"  vs {rung.name} ({rung.elo:.0f}): +{score.wins} ={score.draws} -{score.losses}")

    def play_one(rung: ScaleRung, games: int) -> None:
        done(rung, play_block(rung, games, *claim(rung, games_vs(rung.name))))

    exact_rungs = exact(rungs)

    def fit() -> Any:
        return scale_fit([(player, n, s) for n, s in history], rungs)[player]

    def match_half() -> float:  # the rungs taken as exact: the part of the interval that more games shrink
        r = scale_fit([(player, n, s) for n, s in history], exact_rungs)[player]
        return (r.high - r.low) / 2

    def score_vs(i: int) -> float:
        return MatchScore(*(sum(getattr(s, f) for n, s in history if n == rungs[i].name)
                            for f in ("wins", "draws", "losses"))).score

    lo, hi = 0, len(rungs) - 1  # the bracket: the player scores at least half against rungs[lo], under half against rungs[hi]

    def settle() -> None:
        """Narrow the bracket with every rung inside it that has games (a probe that ended; a rating continued), the
        one nearest the middle first: the first rung it scores under half against bounds it."""
        nonlocal lo, hi
        while hi - lo > 1:
            known = [i for i in range(lo + 1, hi) if games_vs(rungs[i].name)]
            if not known:
                return
            i = min(known, key=lambda k: (abs(k - (lo + hi) // 2), k))
            lo, hi = (i, hi) if score_vs(i) >= 0.5 else (lo, i)

    def keep_busy() -> Any:
        """``jobs`` > 1: up to ``jobs`` blocks in play, a new one started as soon as one ends: probes spread over the
        bracket's rungs not yet probed while it is open, then blocks against the two nearest rungs while the
        interval asks for more; the last fit."""
        in_play: dict[Future[MatchScore], tuple[ScaleRung, int]] = {}

        def coming(name: str | None = None) -> int:  # games played and in play, against ``name`` or in all
            return (total() if name is None else games_vs(name)) + sum(
                g for rung, g in in_play.values() if name is None or rung.name == name)

        def submit(pool: ThreadPoolExecutor, rung: ScaleRung, games: int) -> str:
            in_play[pool.submit(play_block, rung, games, *claim(rung, coming(rung.name)))] = (rung, games)
            return f"{games} games vs {rung.name}"

        def start(pool: ThreadPoolExecutor) -> None:
            settle()
            new = []
            if hi - lo > 1:  # the bracket is open: probe its rungs (settle leaves none inside with games)
                busy = {rung.name for rung, _ in in_play.values()}
                free = [i for i in range(lo + 1, hi) if rungs[i].name not in busy]
                spread = [free[j] for j in _spread(-1, len(free), jobs - len(in_play))]
                room = max(0, math.ceil((max_games - coming()) / probe))  # as many as max_games leaves
                for i in sorted(sorted(spread, key=lambda k: abs(k - (lo + hi) // 2))[:room]):
                    new.append(submit(pool, rungs[i], probe))
            else:
                r, half = fit(), match_half()
                if half <= target:
                    return
                nearest = sorted(rungs, key=lambda g: abs(g.elo - r.elo))[:2]
                # the interval narrows as 1/sqrt(games): about this many games in all reach the target, those in
                # play counted
                wanted = math.ceil((total() * (half / target) ** 2 - coming()) / block)
                while len(in_play) < jobs and coming() < max_games and (wanted > 0 or not in_play):
                    new.append(submit(pool, min(nearest, key=lambda g: coming(g.name)), block))
                    wanted -= 1
            if len(in_play) == len(new) > 1:
                echo(f"  {len(new)} blocks at once: " + ", ".join(new))
            elif new and len(in_play) > len(new):  # a block started beside others still in play
                echo(f"  {'one more block' if len(new) == 1 else f'{len(new)} more blocks'} ({len(in_play)} in play): "
                     + ", ".join(new))

        with ThreadPoolExecutor(jobs) as pool:  # each block's line as it ends
            start(pool)
            while in_play:
                ended, _ = wait(in_play, return_when=FIRST_COMPLETED)
                for future in ended:
                    done(in_play.pop(future)[0], future.result())
                start(pool)
        return fit()

    if jobs == 1:
        settle()
        while hi - lo > 1 and total() < max_games:  # bisection: the middle rung, then the half its score leaves
            play_one(rungs[(lo + hi) // 2], probe)
            settle()
        r = fit()
        while match_half() > target and total() < max_games:
            nearest = sorted(rungs, key=lambda g: abs(g.elo - r.elo))[:2]
            play_one(min(nearest, key=lambda g: games_vs(g.name)), block)
            r = fit()
    else:
        r = keep_busy()
    per_rung = {n: games_vs(n) for n in dict.fromkeys(n for n, _ in history)}
    return ScaleRating(player, r.elo, r.low, r.high, match_half(), sum(per_rung.values()), per_rung, target)


def rate_on_scale(run_dir: Path, cfg: Config, generation: int, target: float = 75.0, probe: int = 10, block: int = 20,
                  max_games: int = 600, simulations: int | None = None, device: str = "auto",
                  engines: dict[str, str | None] | None = None, table: Path | None = None,
                  echo: Callable[[str], None] = print, jobs: int = 1, per_game: bool = False) -> ScaleRating:
    """``azhpc evaluate RUN --generation G --scale``: generation G rated on the calibrated scale. Every block is
    a ledger entry (gen:G against a rung, chess rules only), so a rating that was stopped continues, and
    ``azhpc elo --scale`` fits the same matches. ``jobs`` > 1: that many blocks at once, each in its own process
    (``RecordingPool``), the cores shared between them. ``per_game``: a line per game as it ends, named by its
    block's rung and seed (a block at hundreds of simulations per move takes minutes), from the worker processes too."""
    paths = RunPaths(run_dir)
    rungs = load_scale(table)
    player = f"gen:{generation}"
    setup = PlaySetup.of_config(cfg, simulations)
    book = len(book_openings())
    names = {r.name for r in rungs}
    played: list[Played] = [(e["opponent"], MatchScore(e["wins"], e["draws"], e["losses"]), int(e["seed"]))
                            for e in read_ledger(paths) if e["player"] == player and e["opponent"] in names
                            and counts_in_fit(e) and PlaySetup.of_entry(e) == setup]  # shared-engine blocks: played again, new keys

    def play_block(rung: ScaleRung, games: int, seed: int, first_opening: int) -> MatchScore:
        plan = MatchPlan(player, rung.name, games, setup, f"book:{first_opening % book}", seed, MAX_PLIES)
        label = f"  vs {rung.name} #{seed}: " if per_game else None
        if pool:
            entry = pool.play(paths, cfg, plan, device, engines, progress=label)
        else:
            entry = play_recorded(paths, cfg, plan, device, engines,
                                  echo=(lambda s: echo(label + s.strip())) if label else (lambda s: None))[0]
        return MatchScore(entry["wins"], entry["draws"], entry["losses"])

    search = cfg.play_mcts().algorithm
    warm = ((f", prior temperature {setup.policy_temperature:g}" if setup.policy_temperature != 1.0 else "")
            + (", tree reuse" if setup.tree_reuse else ""))
    echo(f"rating {player} ({setup.simulations} simulations per move, {search.upper() if search == 'puct' else 'Gumbel'}{warm}) on the {SCALE_NAME}: {len(rungs)} rungs, "
         f"{sum(p[1].games for p in played)} games already in the ledger" + (f"; {jobs} blocks at once" if jobs > 1 else ""))
    pool = RecordingPool(jobs) if jobs > 1 else None
    try:
        return climb(player, rungs, play_block, played, target, probe, block, max_games, echo, jobs)
    finally:
        if pool is not None:
            pool.close()


if __name__ == "__main__":  # one calibration task: python -m alphazero_hpc.evaluate.scale OUT TASK TASKS SPEC ENGINES
    import sys

    try:
        calibrate_task(Path(sys.argv[1]), CalibrationSpec(**json.loads(sys.argv[4])), int(sys.argv[2]), int(sys.argv[3]),
                       json.loads(sys.argv[5]))
    except AzhpcError as exc:
        sys.exit(report(exc))
