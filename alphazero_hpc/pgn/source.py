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
from pathlib import Path
from typing import IO

from ..errors import AzhpcError

_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstandard"}
_PROBE = 65536


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
        import zstandard  # the Lichess databases' format; a kept binding of the reference library

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True, read_size=1 << 20)
    return open(path, "rb")


def open_pgn(path: Path) -> io.TextIOWrapper:
    """A text stream of the file's PGN, checked to look like PGN; PgnFileError otherwise."""
    path = Path(path)
    kind = compression(path)
    raw = io.BufferedReader(_binary(path, kind), buffer_size=1 << 20)  # type: ignore[arg-type]
    try:
        head = raw.peek(_PROBE)[:_PROBE]
    except (OSError, EOFError, ValueError) as exc:  # gzip.BadGzipFile, bz2/zstd errors are OSError/ValueError
        raw.close()
        raise PgnFileError(f"{path}: not a readable {kind} file ({exc}); check that it is complete") from exc
    except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError is its own class
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
        if line.startswith("[") or line.startswith("{") or line[0].isdigit() or line in ("*", "1-0", "0-1", "1/2-1/2"):
            return ""
        return f"its first line is {line[:40]!r}"
    return "" if head else "it is empty"
