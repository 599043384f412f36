"""Evaluation: matches against other generations, random, greedy and Stockfish; Elo and its uncertainty."""
