"""Bounded, seeded fuzzing of what users type: the config loader and the UCI loop. Every input ends in a value or
one clean error, never a traceback; every ``go`` ends in exactly one ``bestmove``."""

import dataclasses
import io
import random
import string
import typing

import chess
import pytest

from alphazero_hpc.config import SECTIONS, Config, load_config
from alphazero_hpc.errors import ConfigError

KEYS = [(s, f.name, typing.get_type_hints(cls)[f.name]) for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
NASTY = ["", " ", "0", "-1", "1e999", "-1e999", ".inf", "-.inf", ".nan", "nan", "inf", "2**64", "18446744073709551616",
         "-9223372036854775809", "1e-320", "true", "false", "no", "yes", "null", "~", "[1, 2]", "{a: 1}", "'quoted'",
         "\"q\"", "a #b", "gpu; rm -rf ~", "\u00e9\u00e8", "\x00", "\n", "0x10", "1_000", "3.0", "1e3", "!!python/tuple [1]",
         "*anchor", "&a 1", "- x", ": :", "%", "@", "`", "1.5", "999999999999", "-0", "+5", "0.049", "0.05", "100"]


def random_value(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return rng.choice(NASTY)
    if kind < 0.7:
        return str(rng.choice([rng.randint(-10**6, 10**6), rng.uniform(-1e6, 1e6), 10 ** rng.randint(0, 400)]))
    return "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 12)))


def test_config_overrides_fuzz():
    rng = random.Random(1234)
    accepted = refused = 0
    for _ in range(3000):
        overrides = []
        for _ in range(rng.randint(1, 4)):
            section, key, _hint = rng.choice(KEYS)
            if rng.random() < 0.05:
                key = key + rng.choice(["x", "_", "."])  # unknown keys too
            overrides.append(f"{section}.{key}={random_value(rng)}")
        try:
            cfg = load_config(None, overrides)
        except ConfigError as exc:
            assert str(exc) and "\n" not in str(exc).strip(), overrides
            refused += 1
            continue
        assert isinstance(cfg, Config)
        for values in cfg.to_dict().values():  # whatever was accepted is a finite, checked value
            for value in values.values():
                if isinstance(value, float):
                    assert value == value and abs(value) != float("inf"), overrides
        accepted += 1
    assert accepted > 50 and refused > 1000  # the fuzzer reached both sides


def test_config_files_fuzz(tmp_path):
    rng = random.Random(99)
    path = tmp_path / "c.yaml"
    for _ in range(400):
        lines = []
        for _ in range(rng.randint(0, 6)):
            section, key, _ = rng.choice(KEYS)
            lines.append(rng.choice([f"{section}:\n  {key}: {random_value(rng)}", f"{section}: {random_value(rng)}",
                                     random_value(rng)]))
        data = "\n".join(lines).encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:
            data += bytes(rng.randrange(256) for _ in range(8))
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(exc), data


UCI_WORDS = ["uci", "isready", "ucinewgame", "position", "startpos", "fen", "moves", "go", "nodes", "movetime", "wtime",
             "btime", "winc", "binc", "movestogo", "infinite", "stop", "setoption", "name", "value", "Simulations",
             "MoveTime", "MaxNodes", "debug", "on", "ponderhit", "register", "e2e4", "e7e5", "g1f3", "a7a8q", "0000",
             "-5", "0", "3", "99999999999999999999", "x", "8/8/8/8/8/8/8/8", "w", "b", "-", "KQkq", "\t", "moves e2e4 e2e4"]


def random_uci_line(rng: random.Random, board_fens: list[str]) -> str:
    r = rng.random()
    if r < 0.25:
        return f"go nodes {rng.randint(-2, 6)}"
    if r < 0.35:
        return f"position fen {rng.choice(board_fens)}" + (" moves " + " ".join(rng.choice(UCI_WORDS) for _ in range(rng.randint(0, 3))) if rng.random() < 0.5 else "")
    if r < 0.45:
        return "position startpos moves " + " ".join(rng.choice(["e2e4", "e7e5", "g1f3", "b8c6", "zz", "e2e5"]) for _ in range(rng.randint(0, 4)))
    return " ".join(rng.choice(UCI_WORDS) for _ in range(rng.randint(0, 6)))


def test_uci_loop_fuzz():
    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.uci import UciEngine
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.search.fakes import UniformEvaluator

    rng = random.Random(7)
    fens = [chess.STARTING_FEN, "8/8/8/8/8/8/8/8 w - - 0 1", "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "not a fen",
            "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1", "4k3/8/8/8/8/8/8/4K3 w - - 0 1"]
    out = io.StringIO()
    engine = UciEngine(UniformEvaluator(2), MCTSConfig(), search_rules(10**6), 4, None, out, "fuzz")
    goes = 0
    for _ in range(600):
        line = random_uci_line(rng, fens)
        if line.strip().startswith("quit"):
            continue
        if line.split()[:1] == ["go"]:
            goes += 1
            if "infinite" in line.split():
                line = line.replace("infinite", "nodes 3")  # an infinite search waits for stop: keep it bounded
        try:
            engine.handle(line)
        except Exception as exc:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{line!r}: {type(exc).__name__}: {exc}")
        engine._finish_search()
    engine._finish_search(stop=True)
    lines = out.getvalue().splitlines()
    assert goes > 50
    # every go answered exactly once (a go on a finished game answers "bestmove 0000")
    assert sum(1 for x in lines if x.startswith("bestmove")) == goes, "a go without exactly one bestmove"
    assert not any("Traceback" in x for x in lines)
