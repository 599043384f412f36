"""Chess knowledge, pure numpy over python-chess: the input planes and the 4672-move index (``encoding``), and
how a game ends, for the search, self-play and matches alike (``rules``). Never imports torch."""
