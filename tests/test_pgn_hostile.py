"""Hostile and broken PGN files, imported as a new user would (``azhpc import-pgn RUN FILE``, one process).

For each: the import's peak RSS (of the CLI process, from ``wait4``) stays under ``RSS_BOUND``; it finishes, or
stops with one line naming the file and the game; the games before the bad one are kept in complete shards; the
bad game is counted as malformed; no traceback. docs/faults.md states the bound and the behaviour.
"""

from __future__ import annotations

import bz2
import gzip
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard

from alphazero_hpc.pgn.task import import_totals
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.progress import read_import_progress

RSS_BOUND = 1 << 30  # bytes: the bound docs/faults.md states
GOOD = ('[Event "good {n}"]\n[White "a"]\n[Black "b"]\n[Result "1-0"]\n\n'
        "1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n")  # scholar's mate: 7 positions, ended by the rules


def good(n: int) -> str:
    return "".join(GOOD.format(n=k) for k in range(n))


def import_cli(run: Path, path: Path, *extra: str, timeout: float = 600) -> tuple[int, str, int]:
    """(exit code, stdout + stderr, peak RSS in bytes) of ``azhpc import-pgn RUN FILE``. The peak is the process's
    own high-water mark (``VmHWM``), read every 20 ms while it runs: ``wait4``'s maxrss would include this test
    process's RSS, which a forked child inherits across exec."""
    azhpc = shutil.which("azhpc", path=str(Path(sys.executable).parent)) or "azhpc"
    out = run.parent / f"{run.name}.out"
    peak, deadline = 0, time.monotonic() + timeout
    with open(out, "wb") as fh:
        proc = subprocess.Popen([azhpc, "import-pgn", str(run), str(path), *extra], stdout=fh, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) * 1024)
            except (OSError, IndexError, ValueError):
                pass  # exiting
            if time.monotonic() > deadline:
                proc.kill()
            time.sleep(0.02)
    return proc.returncode, out.read_text(errors="replace"), peak


def progress(run: Path):
    return read_import_progress(RunPaths(run).import_progress(0))


def check_bounded(rc: int, text: str, rss: int) -> None:
    print(f"peak RSS {rss / 2**20:.0f} MiB, exit {rc}: {text.strip().splitlines()[0][:160] if text.strip() else ''}")
    assert "Traceback" not in text, text[-3000:]
    assert rss < RSS_BOUND, f"peak RSS {rss / 2**20:.0f} MiB"
    if rc != 0:
        errors = [line for line in text.splitlines() if line.startswith("Error")]
        assert len(errors) == 1, text[-3000:]


@pytest.mark.parametrize("kind", ["gzip", "bzip2", "zstandard"])
def test_decompression_bomb_stops_with_one_line_and_keeps_the_games_before(tmp_path, kind):
    """Three good games, then 4 GiB of one byte (a few MB compressed): the import stops at game 4, naming the
    file and the bomb; the three games are in a complete shard."""
    chunk = b"a" * (64 << 20)
    packed = {"gzip": lambda b: gzip.compress(b, 9), "bzip2": lambda b: bz2.compress(b, 9),
              "zstandard": lambda b: zstandard.ZstdCompressor(level=19).compress(b)}[kind]
    path = tmp_path / f"bomb.pgn.{ {'gzip': 'gz', 'bzip2': 'bz2', 'zstandard': 'zst'}[kind] }"
    block = packed(chunk)
    with open(path, "wb") as fh:  # concatenated members / streams / frames: each format reads them as one stream
        fh.write(packed(good(3).encode()))
        for _ in range(64):
            fh.write(block)
    assert path.stat().st_size < 64 * len(block) + 4096 < (64 << 20)  # small on disk
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    assert rc != 0 and str(path) in text and "game 4" in text and "decompression bomb" in text, text[-2000:]
    assert import_totals(RunPaths(tmp_path / "run"))[:3:2] == (3, 1)  # three games, one complete shard


def test_a_line_of_1_gib_without_newline(tmp_path):
    path = tmp_path / "line.pgn"
    with open(path, "w") as fh:
        fh.write(good(2) + '[Event "long"]\n[Result "1-0"]\n\n1. e4 ')
        block = "e5 " * (1 << 20)
        for _ in range(342):  # ~1 GiB of movetext on one line
            fh.write(block)
        fh.write("\n\n" + good(1))
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.status == "done" and p.games == 3 and p.malformed == 1, text[-2000:]
    assert p.malformed_games == [3] and "MiB of text in one game" in p.malformed_errors[0]


def test_a_comment_of_100_mb_over_many_lines(tmp_path):
    path = tmp_path / "comment.pgn"
    with open(path, "w") as fh:
        fh.write(good(1) + '[Event "comment"]\n[Result "1-0"]\n\n1. e4 {')
        line = "x" * 79 + "\n"
        for _ in range(100 * (1 << 20) // len(line)):
            fh.write(line)
        fh.write("} e5 1-0\n\n" + good(2))
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.games == 3 and p.malformed == 1 and p.malformed_games == [2], text[-2000:]


def test_variations_nested_100000_deep_keep_the_mainline(tmp_path):
    """Deep variations are valid PGN: the mainline is imported, the variations skipped at python-chess's depth
    counter (no recursion, nothing kept)."""
    depth = 100_000
    path = tmp_path / "deep.pgn"
    path.write_text(good(1) + '[Event "deep"]\n[Result "1-0"]\n\n1. e4 ' + "(1. d4 " * depth + ")" * depth
                    + " e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n" + good(1))
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.games == 3 and p.malformed == 0 and p.positions == 3 * 7, text[-2000:]


def test_a_header_value_of_10_mb_nul_bytes_and_invalid_utf8(tmp_path):
    path = tmp_path / "tags.pgn"
    parts = [good(1).encode(),
             b'[Event "big"]\n[White "' + b"w" * (10 << 20) + b'"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n',
             b'[Event "nul tag"]\n[White "a\x00b"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n',
             b'[Event "nul move"]\n[Result "1-0"]\n\n1. e4 e\x005 1-0\n\n',
             b'[Event "utf8 tag"]\n[White "\xff\xfe"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n',
             b'[Event "utf8 move"]\n[Result "1-0"]\n\n1. e4 \xc3\x28 1-0\n\n',
             good(1).encode()]
    path.write_bytes(b"".join(parts))
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    # undecodable bytes in a tag are kept as replacement characters (Latin-1 names are the PGN standard's charset);
    # in the moves they are a malformed game, as is a NUL anywhere
    assert rc == 0 and p.games == 3 and p.malformed == 4 and p.malformed_games == [2, 3, 4, 6], text[-2000:]
    assert "10,485,760 characters" in p.malformed_errors[0] and "NUL byte" in p.malformed_errors[1]
    assert "NUL byte" in p.malformed_errors[2] and "not UTF-8" in p.malformed_errors[3]


def test_a_file_that_ends_inside_a_game(tmp_path):
    plain = tmp_path / "cut.pgn"
    plain.write_text(good(2) + '[Event "cut"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc')
    rc, text, rss = import_cli(tmp_path / "run", plain)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.games == 2 and p.malformed == 1 and "without a result" in p.malformed_errors[0], text[-2000:]
    packed = tmp_path / "cut.pgn.gz"
    packed.write_bytes(gzip.compress(good(2000).encode())[:-30])  # the gzip stream itself is cut
    rc, text, rss = import_cli(tmp_path / "run2", packed)
    check_bounded(rc, text, rss)
    assert rc != 0 and str(packed) in text and "damaged after game" in text
    games, _, shards = import_totals(RunPaths(tmp_path / "run2"))
    assert shards >= 1 and games >= 100  # the games read before the cut are in complete shards


def test_a_game_of_100000_plies_and_an_impossible_fen(tmp_path):
    shuffle = " ".join(f"{k + 1}. {'Nf3 Nf6' if k % 2 == 0 else 'Ng1 Ng8'}" for k in range(50_000))
    path = tmp_path / "long.pgn"
    path.write_text(good(1) + f'[Event "long"]\n[Result "1/2-1/2"]\n\n{shuffle} 1/2-1/2\n\n'
                    + '[Event "fen"]\n[FEN "k7/8/8/8/8/8/8/KK6 w - - 0 1"]\n[SetUp "1"]\n[Result "1-0"]\n\n1. Kb2 Kb8 1-0\n\n'
                    + '[Event "ply"]\n[FEN "k7/8/8/8/8/8/8/K7 w - - 0 40000"]\n[SetUp "1"]\n[Result "1/2-1/2"]\n\n1. Kb2 1/2-1/2\n\n'
                    + good(1))
    rc, text, rss = import_cli(tmp_path / "run", path)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.games == 2 and p.malformed == 3 and p.malformed_games == [2, 3, 4], text[-2000:]
    assert "75-move rule" in p.malformed_errors[0] and "not a legal position" in p.malformed_errors[1]
    assert "longer than any game" in p.malformed_errors[2]


def test_many_tiny_games(tmp_path):
    """200,000 games of one move (the documented run had a million): memory does not grow with the count."""
    n = 200_000
    path = tmp_path / "tiny.pgn"
    path.write_text('[Result "1-0"]\n\n1. e4 1-0\n\n' * n)
    rc, text, rss = import_cli(tmp_path / "run", path, "--games-per-shard", "2000", timeout=900)
    check_bounded(rc, text, rss)
    p = progress(tmp_path / "run")
    assert rc == 0 and p.games == n and p.positions == n and p.shards_done == n // 2000, text[-2000:]
