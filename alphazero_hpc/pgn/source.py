"""PGN files as one stream of games: plain, gzip, bzip2 or zstandard (as the Lichess databases ship), told
apart by their first bytes, not by their names.

Games are read with python-chess (``chess.pgn.read_game`` / ``skip_game``), which agree on where a game ends.
A file that is not PGN (no tag or move text where the first game should start, binary bytes) or a compressed
file that is damaged raises ``PgnFileError``, one line naming the file and what it holds instead.
"""

from __future__ import annotations

import bz2
import gzip
import io
import re
import zlib
from pathlib import Path
from typing import IO

from ..errors import AzhpcError

# what reading a damaged or truncated file raises (gzip.BadGzipFile and bz2's errors are OSError, a truncated
# stream EOFError, a bad zlib stream zlib.error; _Zstd turns zstandard's errors into OSError)
STREAM_ERRORS = (OSError, EOFError, zlib.error)
_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstandard"}
_PROBE = 65536
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


def _binary(path: Path, kind: str) -> IO[bytes]:
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "bzip2":
        return bz2.open(path, "rb")
    if kind == "zstandard":
        return _Zstd(open(path, "rb"))
    return open(path, "rb")


class _Zstd(io.RawIOBase):
    """Decompressed bytes of a zstandard file, frame after frame, through the ``zstandard`` package (a kept binding of
    the reference library; the Lichess databases' format). Unlike its ``stream_reader``, a file that ends inside a
    frame raises EOFError (as gzip and bz2 do) instead of ending quietly, and damaged data is an OSError."""

    def __init__(self, fh: IO[bytes]) -> None:
        import zstandard

        self._zstd, self._fh = zstandard, fh
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._started = False  # the current frame has been fed data
        self._out = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - a writable buffer
        while not self._out:
            chunk = self._fh.read(1 << 20)
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


def open_pgn(path: Path) -> io.TextIOWrapper:
    """A text stream of the file's PGN, checked to look like PGN; PgnFileError otherwise."""
    path = Path(path)
    kind = compression(path)
    raw = io.BufferedReader(_binary(path, kind), buffer_size=1 << 20)  # type: ignore[arg-type]
    try:
        head = raw.peek(_PROBE)[:_PROBE]
    except STREAM_ERRORS as exc:
        raw.close()
        raise PgnFileError(f"{path}: not a readable {kind} file ({exc}); check that it is complete") from exc
    problem = _not_pgn(head)
    if problem:
        raw.close()
        raise PgnFileError(f"{path}: not a PGN file ({problem}); import-pgn reads PGN, plain or compressed "
                           "with gzip, bzip2 or zstandard")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


def _not_pgn(head: bytes) -> str:
    """Why the first bytes of a (decompressed) file are not PGN, or '' when they may be."""
    if b"\x00" in head:
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
