"""The one compiled part of the package: the search's positions and move generator (alphazero_hpc/game/_movegen.c,
plain C against the CPython API, no dependencies). Everything else is in setup.cfg.

The extension is optional: without a C compiler the install still succeeds, and a search asked for the compiled
move generator (the default) says in one line how to build it or to use mcts.move_generator=python-chess."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("alphazero_hpc.game._movegen", ["alphazero_hpc/game/_movegen.c"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True)])
