"""Evaluation: how strong a network is. Matches against other generations, random, greedy and Stockfish
(``players``, ``match``, ``runner``), the ledger of results (``ledger``), Elo with its uncertainty and the
ladder of a run (``elo``, ``ladder``), and the network as a UCI engine for GUIs and match runners (``uci``)."""
