"""Games from PGN files as training shards (``azhpc import-pgn``): streaming the files (``source``), turning each
accepted game into rows encoded exactly as self-play's (``rows``), and writing them as ordinary shards under
``RUN/import/``, resumably (``task``)."""
