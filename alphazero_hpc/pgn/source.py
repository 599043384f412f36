"""PGN files as one stream of games: plain, gzip, bzip2 or zstandard (as the Lichess databases ship), told
apart by their first bytes, not by their names.

Games are read with python-chess (``chess.pgn.read_game`` / ``skip_game``), which agree on where a game ends.
A file that is not PGN (no tag or move text where the first game should start, mostly binary bytes) or a
compressed file that is damaged raises ``PgnFileError``, one line naming the file and what it holds instead.

Files from outside cannot make an import's memory grow with them (docs/faults.md): ``GameText`` hands python-chess
at most ``MAX_GAME_CHARS`` characters of one game (a longer line is never read whole); the rest of an oversized
game is skipped up to the next game's tags and the game is reported as oversized. A compressed file that expands
more than ``BOMB_RATIO`` times past ``BOMB_AFTER`` bytes stops the import (``ExpansionError``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import re
import zlib
from pathlib import Path
from typing import Any, Protocol

from ..errors import AzhpcError

# what reading a damaged or truncated file raises (gzip.BadGzipFile and bz2's errors are OSError, a truncated
# stream EOFError, a bad zlib stream zlib.error; _Zstd turns zstandard's errors into OSError)
STREAM_ERRORS = (OSError, EOFError, zlib.error)
_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstandard"}
_PROBE = 65536
MAX_GAME_CHARS = 16 << 20  # of one game's text: a game of 17,697 plies (the longest the rules allow) with a comment
                           # on every move is far less; a longer one is hostile or broken
_SKIP_CHUNK = 1 << 20  # characters read at a time while skipping the rest of an oversized game
_ZSTD_FEED = 1024  # compressed bytes fed at a time: a zstandard block of a few bytes can stand for 128 KB, so this
                  # bounds one call's output to ~32 MB (decompressobj has no output limit)
BOMB_RATIO = 1000  # decompressed / compressed bytes: real PGN compresses 5-15x (gzip's own maximum is ~1032x)
BOMB_AFTER = 256 << 20  # decompressed bytes before the ratio is checked
_MOVE_NUMBER = re.compile(r"^\d+\s*\.")  # movetext without tags: '1. e4', '1.e4'


class PgnFileError(AzhpcError):
    """A file given to import is missing, not PGN, or a damaged compressed file."""


def compression(path: Path) -> str:
    """plain, gzip, bzip2 or zstandard, from the file's first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except FileNotFoundError as exc:
        raise PgnFileError(f"{path}: no such file; check the path") from exc
    except OSError as exc:
        raise PgnFileError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from exc
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    return "plain"


class ExpansionError(OSError):
    """A compressed file expands far more than PGN can (a decompression bomb)."""


class _ReadsInto(Protocol):
    """A binary file read with ``readinto``: a raw file, or gzip's, bz2's or ``_Zstd``'s decompressed side."""

    def readinto(self, buffer: Any, /) -> int | None: ...

    def close(self) -> None: ...


class _Counted(io.RawIOBase):
    """A raw file that counts the bytes read from it (the compressed side of ``_Guarded``)."""

    def __init__(self, fh: _ReadsInto) -> None:
        self._fh, self.count = fh, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:  # noqa: ANN001 - a writable buffer
        n = self._fh.readinto(buffer)
        self.count += n or 0
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


class _Guarded(io.RawIOBase):
    """Decompressed bytes, stopped with ExpansionError once more than ``BOMB_AFTER`` of them came from a
    ``BOMB_RATIO``-th as many compressed bytes."""

    def __init__(self, inner: _ReadsInto, compressed: _Counted) -> None:
        self._inner, self._compressed, self.count = inner, compressed, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:  # noqa: ANN001 - a writable buffer
        n = self._inner.readinto(buffer)
        self.count += n or 0
        if self.count > BOMB_AFTER and self.count > BOMB_RATIO * max(1, self._compressed.count):
            raise ExpansionError(f"it expands more than {BOMB_RATIO}x ({self._compressed.count:,} compressed bytes gave "
                                 f"{self.count:,}): a decompression bomb, not PGN")
        return n

    def close(self) -> None:
        self._inner.close()
        self._compressed.close()  # gzip and bz2 leave a file object they were given open
        super().close()


def _binary(path: Path, kind: str) -> io.RawIOBase:
    if kind == "plain":
        return open(path, "rb", buffering=0)
    raw = _Counted(open(path, "rb", buffering=0))
    inner: _ReadsInto
    if kind == "gzip":
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    elif kind == "bzip2":
        inner = bz2.BZ2File(raw, "rb")
    else:
        inner = _Zstd(raw)
    return _Guarded(inner, raw)


class _Zstd(io.RawIOBase):
    """Decompressed bytes of a zstandard file, frame after frame, through the ``zstandard`` package (a kept binding of
    the reference library; the Lichess databases' format). Unlike its ``stream_reader``, a file that ends inside a
    frame raises EOFError (as gzip and bz2 do) instead of ending quietly, and damaged data is an OSError."""

    def __init__(self, fh: io.RawIOBase) -> None:
        import zstandard

        self._zstd, self._fh = zstandard, fh
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._started = False  # the current frame has been fed data
        self._out = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - a writable buffer
        while not self._out:
            chunk = self._fh.read(_ZSTD_FEED)
            if not chunk:
                if self._started:
                    raise EOFError("the zstandard data ends before the end of its last frame (a truncated file)")
                return 0
            self._out = memoryview(self._decompress(chunk))
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _decompress(self, chunk: bytes) -> bytes:
        out = []
        try:
            while chunk:
                self._started = True
                out.append(self._frame.decompress(chunk))
                if not self._frame.eof:
                    break
                chunk = self._frame.unused_data  # the next frame (pzstd and zstd -T write several)
                self._frame = self._zstd.ZstdDecompressor().decompressobj()
                self._started = False
        except self._zstd.ZstdError as exc:
            raise OSError(f"damaged zstandard data: {exc}") from exc
        return b"".join(out)

    def close(self) -> None:
        self._fh.close()
        super().close()


class GameText:
    """The text stream python-chess reads, one game at a time, with at most ``limit`` characters of each game.

    Call ``start_game()`` before each ``read_game``/``skip_game``. A line is read in pieces no longer than what the
    game may still hold, so a 1 GB line never sits in memory. When a game goes past the limit, the rest of it is
    skipped without keeping it (up to a line starting with ``[`` after an empty line, the next game's tags, or the
    end of the file); python-chess is given ``}`` (closing a comment it may be in) and an empty line (ending the
    game) instead, and ``oversized`` says what happened, so the caller counts the game as malformed; so does
    ``flaw``, set by a NUL byte anywhere in the game or undecodable bytes outside its tags."""

    def __init__(self, text: io.TextIOWrapper, limit: int = MAX_GAME_CHARS) -> None:
        self._text, self.limit = text, limit
        self._queue: list[str] = []
        self.chars = 0
        self.oversized = ""
        self.flaw = ""

    def start_game(self) -> None:
        self.chars, self.oversized, self.flaw = 0, "", ""

    def readline(self) -> str:
        if self._queue:
            line = self._queue.pop(0)
            self.chars += len(line)
            return line
        room = self.limit - self.chars
        line = self._text.readline(room + 1)
        self.chars += len(line)
        if not self.flaw and ("\x00" in line or ("\ufffd" in line and not line.startswith("["))):
            # python-chess drops characters it cannot tokenise, so 'e\x005' would vanish from the moves unseen.
            # Tags may hold Latin-1 (the PGN standard's character set): their bytes are replaced, not refused.
            self.flaw = ("a NUL byte in " + ("a tag" if line.startswith("[") else "its moves or comments")
                         if "\x00" in line else "bytes that are not UTF-8 in its moves or comments")
        if self.chars <= self.limit:
            return line
        self.oversized = f"over {self.limit >> 20} MiB of text in one game (a line or comment that long is not a game)"
        held = self._skip_game(at_line_start=line.endswith("\n"))
        self._queue = ["\n"] + ([held] if held else [])
        return "}\n"

    def _skip_game(self, at_line_start: bool) -> str:
        """Read on, keeping nothing, to the next game's first tag line (returned) or the end of the file ('')."""
        blank_before = False
        while True:
            piece = self._text.readline(_SKIP_CHUNK)
            if not piece:
                return ""
            if at_line_start and blank_before and piece.startswith("["):
                return piece
            if at_line_start:
                blank_before = piece.isspace()
            at_line_start = piece.endswith("\n")

    def close(self) -> None:
        self._text.close()

    def __enter__(self) -> GameText:
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.close()


def open_games(path: Path) -> GameText:
    """``open_pgn`` with each game's text bounded (``GameText``): what an import reads."""
    return GameText(open_pgn(path))


def open_pgn(path: Path) -> io.TextIOWrapper:
    """A text stream of the file's PGN, checked to look like PGN; PgnFileError otherwise."""
    path = Path(path)
    kind = compression(path)
    problem = _not_pgn(_head(path, kind))
    if problem:
        raise PgnFileError(f"{path}: not a PGN file ({problem}); import-pgn reads PGN, plain or compressed "
                           "with gzip, bzip2 or zstandard")
    raw = io.BufferedReader(_binary(path, kind), buffer_size=1 << 20)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


def _head(path: Path, kind: str) -> bytes:
    """The first ``_PROBE`` bytes of the file's (decompressed) content, read in small pieces so that a damaged or
    cut file gives what comes before its damage (the import then stops there, naming the game)."""
    pieces, size = [], 0
    with _binary(path, kind) as probe:
        try:
            while size < _PROBE:
                piece = probe.read(4096)
                if not piece:
                    break
                pieces.append(piece)
                size += len(piece)
        except STREAM_ERRORS as exc:
            if not pieces:
                raise PgnFileError(f"{path}: not a readable {kind} file ({exc}); check that it is complete") from exc
    return b"".join(pieces)[:_PROBE]


def _not_pgn(head: bytes) -> str:
    """Why the first bytes of a (decompressed) file are not PGN, or '' when they may be."""
    if head.count(b"\x00") > len(head) // 100:  # a stray NUL in a tag or a move is the game's problem, not the file's
        return "it holds binary data"
    text = head.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(8, len(text) // 100):
        return "it is not text"
    for line in text.lstrip("\ufeff").splitlines():
        line = line.strip()
        if not line or line.startswith("%") or line.startswith(";"):
            continue
        if line.startswith("[") or line.startswith("{") or _MOVE_NUMBER.match(line) or line in ("*", "1-0", "0-1", "1/2-1/2"):
            return ""
        return f"its first line is {line[:40]!r}"
    return "" if head else "it is empty"
