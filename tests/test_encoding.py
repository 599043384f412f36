import chess
import numpy as np
import pytest

from alphazero_hpc.game.encoding import (
    NUM_MOVES, batch_from_chains, chain_for_board, encode_batch, encode_boards, index_to_move, legal_mask,
    move_index, move_indices, num_planes,
)

from .conftest import PERFT_FENS, random_game_boards


def all_test_boards():
    return [chess.Board(f) for f in PERFT_FENS] + random_game_boards(40, seed=1)


def test_every_legal_move_has_a_distinct_index_that_maps_back():
    boards = all_test_boards()
    assert len(boards) > 3000
    for b in boards:
        moves = list(b.legal_moves)
        idx = move_indices(moves, b.turn)
        assert len(set(idx)) == len(idx), b.fen()
        assert all(0 <= i < NUM_MOVES for i in idx)
        for m, i in zip(moves, idx):
            assert move_index(m, b.turn) == i
            assert index_to_move(b, i) == m, (b.fen(), m)


def test_legal_mask_matches_python_chess_exactly():
    for b in all_test_boards():
        mask = legal_mask(b)
        decoded = {index_to_move(b, int(i)) for i in np.flatnonzero(mask)}
        assert decoded == set(b.legal_moves), b.fen()


def test_underpromotions_and_queen_promotion_get_their_own_indices():
    b = chess.Board("8/P6k/8/8/8/8/8/K7 w - - 0 1")
    promos = [m for m in b.legal_moves if m.from_square == chess.A7]
    assert {m.promotion for m in promos} == {chess.QUEEN, chess.ROOK, chess.BISHOP, chess.KNIGHT}
    assert len({move_index(m, b.turn) for m in promos}) == 4


def test_black_moves_are_encoded_as_the_mirrored_white_move():
    b = chess.Board()
    b.push_san("e4")
    e5 = chess.Move.from_uci("e7e5")
    assert move_index(e5, chess.BLACK) == move_index(chess.Move.from_uci("e2e4"), chess.WHITE)


@pytest.mark.parametrize("history", [1, 2, 8])
def test_planes_see_the_board_from_the_side_to_move(history):
    # A position and its colour-mirror look identical to the side to move, except for the colour plane.
    for b in random_game_boards(5, seed=2, max_plies=60)[::7]:
        mirrored = chess.Board(b.mirror().fen())  # without history: compare against the bare position
        bare = chess.Board(b.fen())
        p1 = encode_boards([bare], history)[0]
        p2 = encode_boards([mirrored], history)[0]
        colour = 14 * history
        assert p1.shape == (num_planes(history), 8, 8)
        diff = np.flatnonzero(np.abs(p1 - p2).sum(axis=(1, 2)))
        assert set(diff.tolist()) <= {colour}


def test_piece_planes_match_the_board():
    b = chess.Board("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1")
    planes = encode_boards([b], 1)[0]
    # black to move: "our" pieces are black, ranks mirrored so black's back rank is row 0
    for sq, piece in b.piece_map().items():
        plane = (piece.piece_type - 1) + (0 if piece.color == chess.BLACK else 6)
        row, col = chess.square_rank(sq) ^ 7, chess.square_file(sq)
        assert planes[plane, row, col] == 1.0
    assert planes[:12].sum() == len(b.piece_map())
    assert planes[14].all()  # colour plane: black to move
    assert planes[15:19].all(axis=(1, 2)).tolist() == [True, True, True, True]  # all castling rights


def test_history_and_repetitions_follow_the_game():
    b = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1", "Ng8"]:
        b.push_san(san)
    chain = chain_for_board(b, 8)
    batch = batch_from_chains([chain], 8)
    # The start position now occurs for the third time: two earlier occurrences.
    assert batch.repetitions[0, 0] == 2
    assert b.is_repetition(3)
    planes = encode_batch(batch)[0]
    assert planes[12].all() and planes[13].all()
    # 4 plies ago the same position (second occurrence): one earlier occurrence
    assert batch.repetitions[0, 4] == 1
    # Step 1 (after 1...Ng8's predecessor) has the black knight on f6 from white's view.
    prev = chess.Board()
    for san in ["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1"]:
        prev.push_san(san)
    assert (batch.bitboards[0, 1, 1] == prev.knights)


def test_repetition_counts_agree_with_python_chess():
    for b in random_game_boards(30, seed=3, max_plies=200)[::3]:
        batch = batch_from_chains([chain_for_board(b, 1)], 1)
        reps = int(batch.repetitions[0, 0])
        assert (reps >= 1) == b.is_repetition(2), b.fen()
        assert (reps >= 2) == b.is_repetition(3), b.fen()


def test_encoding_never_imports_torch():
    import subprocess
    import sys

    code = "import sys, alphazero_hpc.game.encoding, alphazero_hpc.search.puct, alphazero_hpc.selfplay.engine; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
