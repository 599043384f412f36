"""The azhpc command: a thin command line over the library. Each command parses, calls one library function and
prints.

Modules: ``app`` (the group; errors a user can cause become one line), ``options`` (options several commands
share), ``runs`` (selfplay, train, launch, import-pgn, status, cancel, resume, doctor), ``evaluation`` (evaluate,
elo, uci, plot, ladder) and ``bench`` (the benchmarks).
"""

from . import bench, evaluation, runs  # noqa: F401 - each registers its commands on ``main``
from .app import main

__all__ = ["main"]
