"""Chess knowledge: the input planes and the 4672-move index, numpy over python-chess (``encoding``), how a game
ends, for the search, self-play and matches alike (``rules``), and the search's compiled positions
(``position``, over the C extension ``_movegen.c``, with ``ChessPosition``, python-chess behind the same
interface). Never imports torch."""
