"""Chess knowledge: the input planes and the 4672-move index, numpy over python-chess (``encoding``), the optional attack planes
(``attacks``: squares each side attacks, pieces en prise, over a whole batch's bitboards), how a game
ends, for the search, self-play and matches alike (``rules``), and the search's compiled positions
(``position``, over the C extension ``_movegen.c``, with ``ChessPosition``, python-chess behind the same
interface). Never imports torch."""
