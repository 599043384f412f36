"""Evaluation: how strong a network is. Matches against other generations, random, greedy and UCI engines
(``players``, ``engines``, ``match``, ``runner``; ``stage``, the evaluation stage of a launch), the ledger of results
(``ledger``), Elo with its uncertainty and the ladder of a run (``elo``, ``ladder``), several runs of one recipe side
by side with their mean (``seeds``), the calibrated scale from random to Stockfish 15.1 at UCI_Elo 1350 with its
shipped table (``scale``, ``scale.json``), and the network as a UCI engine for GUIs and match runners (``uci``)."""
