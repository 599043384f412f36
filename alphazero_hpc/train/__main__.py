"""``python -m alphazero_hpc.train``: the trainer's command line (see ``trainer`` for the launch commands)."""

import sys

from .trainer import main

sys.exit(main())
