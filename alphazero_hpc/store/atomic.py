"""Atomic file writes: every file another process reads goes through here.

A write goes to a temporary name in the destination folder, is flushed and fsynced, and is renamed over
the destination; the folder is fsynced so the rename survives a crash. A reader therefore sees either the
old file or the complete new one, never a partial one, even if the writer is killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ..errors import describe_os_error

TMP_SUFFIX = ".tmp"


def _file_mode() -> int:
    """0666 less the process umask: what open() would give, so other users of shared storage can read."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(dest: os.PathLike[str] | str, doing: str = "writing") -> Iterator[Path]:
    """Yield a temporary path next to ``dest``; on success fsync it and rename it to ``dest``.

    The temporary file is removed if the body raises, so nothing half-written is left behind.
    OSErrors (full disk, read-only folder) become one-line ``RunDirError``s.
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TMP_SUFFIX, dir=dest.parent)
        os.fchmod(fd, _file_mode())  # mkstemp makes 0600 files
        os.close(fd)
    except OSError as exc:
        raise describe_os_error(exc, dest, doing) from exc
    tmp = Path(tmp_name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
        fsync_dir(dest.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise describe_os_error(exc, dest, doing) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(dest: os.PathLike[str] | str, data: bytes | memoryview, doing: str = "writing") -> None:
    with atomic_path(dest, doing) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)


def write_text(dest: os.PathLike[str] | str, text: str, doing: str = "writing") -> None:
    write_bytes(dest, text.encode(), doing)


def write_json(dest: os.PathLike[str] | str, obj: Any, doing: str = "writing") -> None:
    write_bytes(dest, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode(), doing)



def read_json(path: os.PathLike[str] | str) -> Any:
    with open(path) as fh:
        return json.load(fh)


def temporaries(dest: os.PathLike[str] | str) -> list[Path]:
    """The temporaries that writers of ``dest`` left (``atomic_path``'s names: a writer killed before its rename)."""
    dest = Path(dest)
    return sorted(dest.parent.glob(f".{dest.name}.*{TMP_SUFFIX}"))


def remove_stale_temporaries(folder: Path) -> int:
    """Delete temporaries a killed writer left in ``folder``; returns how many were removed."""
    removed = 0
    if folder.is_dir():
        for tmp in folder.glob(f".*{TMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed
