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
from typing import Any, Iterator

from ..store import atomic
from ..errors import RunDirError, describe_os_error, no_locks
from ..store.paths import RunPaths

LEDGER_SCHEMA = 1


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


def read_ledger(paths: RunPaths) -> list[dict[str, Any]]:
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
        entries.append(entry)
    return entries


def find_entry(paths: RunPaths, key: str) -> dict[str, Any] | None:
    return next((e for e in read_ledger(paths) if e["key"] == key), None)


def append_entry(paths: RunPaths, entry: dict[str, Any]) -> bool:
    """Add ``entry`` unless one with its key is there; returns whether it was added."""
    entry = {"schema": LEDGER_SCHEMA, **entry}
    with _locked(paths):
        entries = read_ledger(paths)
        if any(e["key"] == entry["key"] for e in entries):
            return False
        lines = [json.dumps(e, sort_keys=True) for e in entries + [entry]]
        atomic.write_text(paths.ledger, "\n".join(lines) + "\n", doing="appending to the evaluation ledger")
    return True
