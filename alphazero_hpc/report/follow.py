"""Following a run until nothing can change any more: ``azhpc launch --wait``, ``azhpc resume --wait``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..launch.local import LocalSupervisor
from .render import render, render_brief
from .status import RunStatus, collect, finished


def _echo_changes(echo: Callable[[str], None]) -> Callable[[RunStatus], None]:
    last = [""]

    def show(status: RunStatus) -> None:
        line = render_brief(status)
        if line != last[0]:
            echo(time.strftime("[%H:%M:%S] ") + line)
            last[0] = line

    return show


def wait(run_dir: Path, echo: Callable[[str], None] = print, poll_s: float = 5.0) -> bool:
    """Print a line whenever the run's progress changes, until the run is over; True if it succeeded."""
    show = _echo_changes(echo)
    while True:
        status = collect(run_dir)
        show(status)
        over, ok = finished(status)
        if over:
            echo(render(status))
            return ok
        time.sleep(poll_s)


def run_local_foreground(run_dir: Path, echo: Callable[[str], None] = print, tick_s: float = 5.0) -> bool:
    """Run the local supervisor in this process, printing status as it goes; True if the run succeeded."""
    show = _echo_changes(echo)
    code = LocalSupervisor(run_dir, on_tick=lambda: show(collect(run_dir)), tick_s=tick_s).run()
    echo(render(collect(run_dir)))
    return code == 0
