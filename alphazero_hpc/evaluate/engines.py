"""UCI engines as evaluation opponents: Stockfish and Fairy-Stockfish, weakened, limited or on a real clock.

An engine opponent is a plain spec, ``ENGINE[:key=value,...]``:

- ``ENGINE`` is ``stockfish`` (Debian's 15.1) or ``fairy-stockfish`` (Debian's 11.1, whose Skill Level goes
  down to -20: at -4 it picks nearly uniformly among its top moves, below that it prefers worse ones);
- ``skill=S``: Skill Level (stockfish 0..20, fairy-stockfish -20..20);
- ``elo=E``: ``UCI_LimitStrength`` with ``UCI_Elo`` E (1350..2850), Stockfish's calibrated strength limit;
- one limit per move: ``nodes=N``, ``depth=D``, ``movetime=MS`` (milliseconds), or ``tc=BASE+INC`` (a real clock
  in seconds, e.g. ``tc=60+0.6``: the engine gets its remaining time and increment as in a timed game).
  Without one, ``nodes=2000``.

``canonical_engine_name`` orders the options so that one setting has one ladder name. Limits measured in time
(``movetime``, ``tc``) make strength depend on the CPU: the same spec is stronger on a faster machine.
"""

from __future__ import annotations

import re
import shutil
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import chess
import chess.engine

from ..errors import AzhpcError

ENGINES = {"stockfish": (0, 20), "fairy-stockfish": (-20, 20)}  # name -> Skill Level range
_BINARIES = {"stockfish": ("stockfish", "/usr/games/stockfish"),
             "fairy-stockfish": ("fairy-stockfish", "/usr/games/fairy-stockfish")}
_KEYS = ("skill", "elo", "nodes", "depth", "movetime", "tc")  # canonical order (skill, nodes, depth as before)
_TC = re.compile(r"(\d+(?:\.\d+)?)\+(\d+(?:\.\d+)?)")
_SPEC_HELP = ("ENGINE[:skill=S][,elo=E][,nodes=N|depth=D|movetime=MS|tc=BASE+INC] with ENGINE stockfish or "
              "fairy-stockfish, e.g. stockfish:skill=0,depth=1 or stockfish:elo=1350,tc=60+0.6")


@dataclass(frozen=True)
class EngineSpec:
    engine: str  # stockfish | fairy-stockfish
    skill: int | None = None
    elo: int | None = None  # UCI_LimitStrength + UCI_Elo
    nodes: int | None = None
    depth: int | None = None
    movetime_ms: int | None = None
    tc: tuple[float, float] | None = None  # (base seconds, increment seconds): a real clock

    @property
    def name(self) -> str:
        """The canonical ladder name: options in one order, numbers as written by ``_number``."""
        values = {"skill": self.skill, "elo": self.elo, "nodes": self.nodes, "depth": self.depth,
                  "movetime": self.movetime_ms,
                  "tc": None if self.tc is None else f"{_number(self.tc[0])}+{_number(self.tc[1])}"}
        parts = [f"{k}={values[k]}" for k in _KEYS if values[k] is not None]
        return self.engine + (":" + ",".join(parts) if parts else "")

    @property
    def timed(self) -> bool:
        """Strength rests on a time limit (movetime or a clock), so on the speed of the CPU."""
        return self.movetime_ms is not None or self.tc is not None

    def options(self) -> dict[str, str | int | bool | None]:
        options: dict[str, str | int | bool | None] = {"Threads": 1, "Hash": 16}
        if self.skill is not None:
            options["Skill Level"] = self.skill
        if self.elo is not None:
            options["UCI_LimitStrength"] = True
            options["UCI_Elo"] = self.elo
        return options


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def is_engine_spec(spec: str) -> bool:
    return spec.partition(":")[0] in ENGINES


def plays_per_game(spec: str) -> bool:
    """An engine whose search goes beyond depth 1: ``EnginePlayer`` gives each of its games a process of its own."""
    return is_engine_spec(spec) and parse_engine(spec).depth != 1


def parse_engine(spec: str) -> EngineSpec:
    """``stockfish:skill=0,depth=1`` -> EngineSpec; a wrong spec is one AzhpcError line with the grammar."""
    engine, _, rest = spec.strip().partition(":")
    if engine not in ENGINES:
        raise AzhpcError(f"opponent '{spec}': expected {_SPEC_HELP}")
    values: dict[str, Any] = {}  # int per option, a (base, increment) pair for tc
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        ok = bool(eq) and key in _KEYS and key not in values
        if ok and key == "tc":
            m = _TC.fullmatch(value)
            ok = m is not None and float(m.group(1)) > 0
            if m is not None and ok:
                values[key] = (float(m.group(1)), float(m.group(2)))
        elif ok:
            ok = re.fullmatch(r"-?\d+", value) is not None
            if ok:
                values[key] = int(value)
        if not ok:
            raise AzhpcError(f"opponent '{spec}': '{part}' is not an option; expected {_SPEC_HELP}")
    lo, hi = ENGINES[engine]
    if "skill" in values and not lo <= values["skill"] <= hi:
        raise AzhpcError(f"opponent '{spec}': {engine} skill must be in {lo}..{hi}")
    if "elo" in values and not 1350 <= values["elo"] <= 2850:
        raise AzhpcError(f"opponent '{spec}': elo (UCI_Elo) must be in 1350..2850")
    for key in ("nodes", "depth", "movetime"):
        if key in values and values[key] < 1:
            raise AzhpcError(f"opponent '{spec}': {key} must be >= 1")
    limits = [k for k in ("nodes", "depth", "movetime", "tc") if k in values]
    if "tc" in values and len(limits) > 1:
        raise AzhpcError(f"opponent '{spec}': a clock (tc=) is the only limit of its engine; drop {', '.join(l for l in limits if l != 'tc')}")
    if not limits:
        values["nodes"] = 2000
    return EngineSpec(engine, values.get("skill"), values.get("elo"), values.get("nodes"), values.get("depth"),
                      values.get("movetime"), values.get("tc"))


def canonical_engine_name(spec: str) -> str:
    """A canonical ladder name for an engine setting (the order of its options does not matter)."""
    return parse_engine(spec).name


def find_engine(engine: str = "stockfish", path: str | None = None) -> str:
    """The engine's binary, or an AzhpcError saying how to install it."""
    for candidate in ([path] if path else list(_BINARIES[engine])):
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    where = f" at {path}" if path else " on PATH or in /usr/games"
    flag = "--stockfish PATH" if engine == "stockfish" else "--fairy-stockfish PATH"
    raise AzhpcError(f"{engine} not found{where}: install it (Debian/Ubuntu: apt-get install {engine}) or pass "
                     f"{flag}; the opponents random, greedy, previous and gen:K work without it")


def find_stockfish(path: str | None = None) -> str:
    return find_engine("stockfish", path)


def engine_version(engine: str, path: str | None = None) -> str:
    """The engine's ``id name`` (e.g. 'Stockfish 15.1'), for provenance."""
    with chess.engine.SimpleEngine.popen_uci(find_engine(engine, path)) as e:
        return str(e.id.get("name", engine))


class EnginePlayer:
    """A UCI engine (python-chess's engine module, one thread) playing as ``spec`` says.

    A match plays its games at once and asks each player for a move in every game in turn. An engine whose search
    goes beyond depth 1 (a clock, a move time, a node count, a deeper depth) plays each game in its own process, sent
    ``ucinewgame`` when it starts one, as a GUI runs it: its hash table and search state then hold that game's own
    earlier searches. Shared by every game in flight, each search overwrote the others' (16 MB, ~1.5M nodes a move
    at 60+0.6), and Stockfish's time management read the previous search's score from another game; an engine fixed
    at depth 1 stores nothing a later move reuses, so its games share one process. At most ``max_processes`` run at
    once (~140 MB each for Stockfish 15.1; ``play_recorded`` plays no more games at once than that); a game beyond them
    takes the process used longest ago, which starts it as a new game.

    With a clock (``tc``) each game has its own: the time a move took (wall time around the engine's answer) is
    taken from the engine's remaining time and the increment added, as a GUI does. A move that overran the clock
    is counted in ``overruns`` and the clock restarts at the increment: the game goes on rather than being lost on
    time, and the caller reports the count. Clocks are kept per board object for the life of the player (the
    match keeps one board per game), holding a reference so that no later board can take its id.
    """

    def __init__(self, spec: EngineSpec, paths: Mapping[str, str | None] | None = None, max_processes: int = 16,
                 per_game: bool | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.overruns = 0
        self.per_game = plays_per_game(spec.name) if per_game is None else per_game  # None: beyond depth 1 only
        self.max_processes = max(1, max_processes)
        self._clocks: dict[int, tuple[chess.Board, float]] = {}
        self._binary = find_engine(spec.engine, (paths or {}).get(spec.engine))
        # board id -> (board, its game's key, its process); the most recently used last
        self._games: OrderedDict[int, tuple[chess.Board, object, chess.engine.SimpleEngine]] = OrderedDict()
        self.engine = self._start()

    def _start(self) -> chess.engine.SimpleEngine:
        engine = None
        try:
            engine = chess.engine.SimpleEngine.popen_uci(self._binary)
            engine.configure(self.spec.options())
        except (chess.engine.EngineError, OSError) as exc:
            if engine is not None:
                engine.quit()
            raise AzhpcError(f"{self.spec.engine} at {self._binary} did not start ({exc}): check the binary or pass "
                             "its path") from exc
        return engine

    def _engine_for(self, board: chess.Board) -> tuple[chess.engine.SimpleEngine, object]:
        """The process playing ``board``'s game and the game's key (a new key: python-chess sends ucinewgame)."""
        if not self.per_game:
            return self.engine, None
        known = self._games.get(id(board))  # the entry holds its board: no other board can have taken that id
        if known is not None:
            self._games.move_to_end(id(board))
            return known[2], known[1]
        if len(self._games) < self.max_processes:
            engine = self.engine if not self._games else self._start()
        else:  # every process taken: the one used longest ago (most likely a game that has ended)
            engine = self._games.popitem(last=False)[1][2]
        self._games[id(board)] = (board, object(), engine)
        return engine, self._games[id(board)][1]

    def _limit(self, board: chess.Board) -> chess.engine.Limit:
        s = self.spec
        if s.tc is None:
            return chess.engine.Limit(nodes=s.nodes, depth=s.depth,
                                      time=None if s.movetime_ms is None else s.movetime_ms / 1000.0)
        remaining = self._clocks.get(id(board), (board, s.tc[0]))[1]
        return chess.engine.Limit(white_clock=remaining, black_clock=remaining, white_inc=s.tc[1], black_inc=s.tc[1])

    def choose(self, boards: Sequence[chess.Board]) -> list[chess.Move | None]:
        out: list[chess.Move | None] = []
        for b in boards:
            engine, game = self._engine_for(b)
            limit = self._limit(b)
            t0 = time.monotonic()
            result = engine.play(b, limit, game=game)
            if self.spec.tc is not None:
                left = (limit.white_clock or 0.0) - (time.monotonic() - t0)
                if left < 0:
                    self.overruns += 1
                    left = 0.0
                self._clocks[id(b)] = (b, left + self.spec.tc[1])
            out.append(None if result.resigned else result.move)
        return out

    def _processes(self) -> list[chess.engine.SimpleEngine]:
        """Every engine process started and not yet quit, each once (a process serves one game after another)."""
        return list({id(e): e for e in [self.engine, *(e for _, _, e in self._games.values())]}.values())

    def processes(self) -> int:
        """Engine processes started so far and still running."""
        return len(self._processes())

    def close(self) -> None:
        self._clocks.clear()
        engines = self._processes()
        self._games.clear()
        failed: BaseException | None = None
        for engine in engines:  # every process, also after one that failed to quit
            try:
                engine.quit()
            except Exception as exc:  # noqa: BLE001 - re-raised below, once the rest are quit
                failed = failed or exc
        if failed is not None:
            raise failed
