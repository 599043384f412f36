"""This machine's processes as Linux's ``/proc`` shows them, read in one place: a process's state letter, whether
it is a kernel thread, its parent, its command line, its CPU seconds and when it started. Each reader returns None where ``/proc`` cannot tell (another OS, a
process gone) and leaves the caller to decide what that means. And a child's tie to its parent's life
(``die_with_parent``)."""

from __future__ import annotations

import ctypes
import os
import signal


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (whose parentheses may hold anything)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def started(pid: int | None = None) -> float | None:
    """When the process (default: this one) started, as a Unix time: its start in clock ticks after boot plus the
    boot time (``/proc/stat`` btime)."""
    fields = _stat_fields(pid or os.getpid())
    try:
        with open("/proc/stat") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK") if fields else None
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def state(pid: int) -> str | None:
    """The process's state letter (R, S, D, Z for a zombie, ...)."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


PF_KTHREAD = 0x00200000  # the kernel's flag for its own threads (include/linux/sched.h)


def kernel_thread(pid: int) -> bool | None:
    """Whether the process is one of the kernel's threads (an empty command line, as a process on its way out has)."""
    fields = _stat_fields(pid)
    try:
        return bool(int(fields[6]) & PF_KTHREAD) if fields else None
    except (IndexError, ValueError):
        return None


def parent(pid: int) -> int | None:
    """The process's parent pid."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def pids() -> list[int]:
    """Every process id ``/proc`` lists ([] where there is no ``/proc``)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (torchrun starts its workers in sessions of their own, so a process group
    does not reach them)."""
    children: dict[int, list[int]] = {}
    for child in pids():
        up = parent(child)
        if up is not None:
            children.setdefault(up, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cwd(pid: int) -> str | None:
    """The process's working directory."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def cmdline(pid: int) -> bytes | None:
    """The process's command line, NUL-separated (empty for a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def cpu_seconds(pids: list[int]) -> list[float]:
    """User + system CPU seconds of each process; empty when any of them cannot be read."""
    out = []
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 13:
            return []
        out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """For ``Popen(preexec_fn=...)``: the child is sent ``signum`` when the process that started it dies (Linux's
    PR_SET_PDEATHSIG; it survives exec). Elsewhere nothing happens."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
