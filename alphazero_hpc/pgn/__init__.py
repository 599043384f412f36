"""Games from PGN files as training shards (``azhpc import-pgn``): streaming the files, turning each accepted
game into rows encoded exactly as self-play's, and writing them as ordinary shards under ``RUN/import/``."""
