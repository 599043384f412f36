"""The tree search, behind one API (``api.TreeSearch``): trees over positions in, frozen ``SearchResult``s out.

``forest`` holds every node of every tree in flat arrays, ``puct`` selects, evaluates in one batch and backs
up, ``gumbel`` is the Gumbel root search (sequential halving and the improved policy), ``evaluator`` is the protocol a network implements, ``fakes`` are evaluators with known answers. The
search knows nothing of games, players, shards or files, and never imports torch."""
