"""Types of the compiled move generator (``_movegen.c``); ``position.SearchPosition`` is what the search needs of
it, and ``ChessPosition`` offers the same on python-chess."""

class Position:
    """An immutable chess position (standard chess, no move stack); moves are ints
    ``from | to << 6 | promotion << 12`` and follow python-chess's rules and move order."""

    def __new__(cls, pawns: int, knights: int, bishops: int, rooks: int, queens: int, kings: int, white: int,
                black: int, turn: bool, castling_rights: int, ep_square: int | None, halfmove_clock: int,
                fullmove_number: int) -> Position: ...
    pawns: int  # bitboards, python-chess's square numbering (a1 = 0)
    knights: int
    bishops: int
    rooks: int
    queens: int
    kings: int
    white: int
    black: int
    castling_rights: int  # the rooks' squares, as python-chess's castling_rights (cleaned)
    turn: bool  # True: white to move
    ep_square: int | None
    halfmove_clock: int
    fullmove_number: int
    ply: int
    def legal_moves(self) -> list[int]: ...
    def has_legal_moves(self) -> bool: ...
    def push(self, move: int) -> Position: ...  # ValueError for an int that is not a legal move here
    def is_check(self) -> bool: ...
    def mating_move(self) -> int | None: ...  # the first legal move (python-chess's order) that checkmates
    def is_insufficient_material(self) -> bool: ...
    def key(self) -> tuple: ...

def perft(position: Position, depth: int) -> int: ...
