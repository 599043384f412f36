"""Errors a user can cause. Each carries one line that names the problem and the fix.

The CLI prints ``str(error)`` and exits 1 (``AZHPC_DEBUG=1`` shows the traceback instead). Library
callers can catch the specific subclasses; all of them are ``ValueError``s, as python-chess does.
"""

from __future__ import annotations

import errno
import os
import sys


def debugging() -> bool:
    """The one debug switch: ``AZHPC_DEBUG`` set and not 0 makes user errors raise with their traceback."""
    return os.environ.get("AZHPC_DEBUG", "") not in ("", "0")


def failure_line(exc: BaseException) -> str:
    """How every record states a failure (progress records, training outcomes, worker messages): one line, the
    message of a user's error, ``Type: message`` of anything else (a bug: the traceback is recorded beside it)."""
    text = str(exc) if isinstance(exc, AzhpcError) and str(exc) else f"{type(exc).__name__}: {exc}".rstrip(": ")
    return text.splitlines()[0]


def report(exc: BaseException) -> int:
    """A process's last word on a user's error: ``Error: <line>`` on stderr and exit status 1 (what click prints for
    the CLI), or the error raised again under ``AZHPC_DEBUG``. Call it from an ``except`` block."""
    if debugging():
        raise exc
    print(f"Error: {exc}", file=sys.stderr, flush=True)
    return 1


class AzhpcError(ValueError):
    """Base class of every error the user can fix."""


class ConfigError(AzhpcError):
    """A configuration key or value is wrong."""


class CheckpointError(AzhpcError):
    """A checkpoint is missing, unreadable or does not match the run."""


class ShardError(AzhpcError):
    """A shard is corrupt, truncated or of another schema."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"shard {self.path}: {reason}")


class ShardSchemaError(ShardError):
    """A shard or sidecar of another schema: written by another azhpc version, not damaged."""


class RunDirError(AzhpcError):
    """The run folder cannot be used (read-only, full, conflicting config)."""


def describe_os_error(exc: OSError, path: object, doing: str) -> AzhpcError:
    """Turn an OSError raised while writing ``path`` into a one-line error with the fix."""
    where = str(path)
    if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
        return RunDirError(
            f"no space left on the device while {doing} {where}: free space or quota there, or use another "
            "--run-dir; completed files are intact and a rerun continues from them"
        )
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return RunDirError(
            f"cannot write {where} while {doing} ({exc.strerror}): make the run folder writable or choose "
            "another --run-dir"
        )
    return RunDirError(f"{exc.strerror or exc} while {doing} {where}")


def no_locks(path: object, exc: OSError) -> RunDirError:
    """``flock`` refused (Lustre mounted ``noflock``, NFS ``nolock``): the run folder cannot keep two writers apart."""
    return RunDirError(f"cannot lock {path} ({exc.strerror or exc}): the file system does not support flock (Lustre "
                       "noflock, NFS nolock); put the run folder on storage that does, or mount it with flock/localflock")
