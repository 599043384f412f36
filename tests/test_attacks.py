"""The attack planes (model.attack_planes) against python-chess, square by square, and through the pipeline."""

import chess
import numpy as np
import pytest

from alphazero_hpc.game.attacks import ATTACK_PLANES, attack_maps, capture_gain
from alphazero_hpc.game.encoding import encode_boards, num_planes

from .conftest import PERFT_FENS, random_game_boards

VALUE = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 100}


def _kind(board: chess.Board, square: int) -> int:
    """The piece type on an occupied ``square``."""
    kind = board.piece_type_at(square)
    assert kind is not None, f"no piece on {chess.square_name(square)}"
    return kind


def _attackers(board: chess.Board, colour: chess.Color, square: int) -> list[int]:
    """Piece types of ``colour`` that attack ``square`` (pseudo-legal: pins ignored, as the planes do)."""
    return [_kind(board, s) for s in board.attackers(colour, square)]


def _expected(board: chess.Board) -> list[int]:
    """The four maps by definition, one square at a time with python-chess."""
    attacked = {c: sum(1 << s for s in chess.SQUARES if board.is_attacked_by(c, s)) for c in chess.COLORS}

    def en_prise(side: chess.Color) -> int:
        out = 0
        for s in chess.SquareSet(board.occupied_co[side]):
            by = _attackers(board, not side, s)
            kind = _kind(board, s)
            if by and (kind == chess.KING or not attacked[side] >> s & 1 or min(VALUE[t] for t in by) < VALUE[kind]):
                out |= 1 << s
        return out

    us, them = board.turn, not board.turn
    return [attacked[us], attacked[them], en_prise(us), en_prise(them)]


def _bitboards(boards):
    return np.array([[b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, b.occupied_co[chess.WHITE],
                      b.occupied_co[chess.BLACK]] for b in boards], dtype=np.uint64)


def test_attack_maps_match_python_chess_on_every_square():
    boards = [chess.Board(f) for f in PERFT_FENS] + random_game_boards(60, seed=5, max_plies=160)
    maps = attack_maps(_bitboards(boards), np.array([b.turn for b in boards]))
    for b, got in zip(boards, maps):
        assert [int(x) for x in got] == _expected(b), b.fen()


def _expected_tactics(board: chess.Board) -> list[int]:
    """The second set of maps by definition: pinned pieces and squares attacked twice, with python-chess."""
    def pinned(side: chess.Color) -> int:
        return sum(1 << s for s in chess.SquareSet(board.occupied_co[side]) if board.is_pinned(side, s))

    def twice(side: chess.Color) -> int:
        return sum(1 << s for s in chess.SQUARES if len(board.attackers(side, s)) >= 2)

    us, them = board.turn, not board.turn
    return [pinned(us), pinned(them), twice(us), twice(them)]


PIN_FENS = [
    "4k3/8/8/8/8/8/8/4K3 w - - 0 1",  # bare kings: nothing pinned, nothing attacked twice
    "q3k3/1n6/8/3b4/8/1P3N2/2B5/r1R1K2r w - - 0 1",  # the c1 rook pinned on the rank; the f3 knight is not
    "4r1k1/8/8/8/8/8/4N3/4K3 b - - 0 1",  # a knight pinned on the file
    "7k/6p1/8/8/3B4/8/8/K7 w - - 0 1",  # a pawn pinned on the diagonal
    "k7/8/8/8/8/8/8/KN1q4 w - - 0 1",  # a knight pinned on the rank
    "k7/8/8/8/8/8/8/KNBq4 w - - 0 1",  # two pieces between king and queen: no pin
    "3k4/3r4/8/3Q4/8/8/8/3K4 w - - 0 1",  # queen and rook pin each other on the file
    "8/8/8/2k5/3Q4/8/8/6BK b - - 0 1",  # the enemy queen between king and bishop: check, no pin
    "3rk3/8/8/8/3N4/8/8/3Q2K1 w - - 0 1",  # queen, knight and king attack squares twice; no x-ray through d4
]


def test_tactic_maps_match_python_chess_on_every_square():
    boards = [chess.Board(f) for f in PERFT_FENS + PIN_FENS] + random_game_boards(60, seed=11, max_plies=160)
    maps = attack_maps(_bitboards(boards), np.array([b.turn for b in boards]), sets=2)
    assert maps.shape == (len(boards), 2 * ATTACK_PLANES)
    pins = 0
    for b, got in zip(boards, maps):
        assert [int(x) for x in got[:4]] == _expected(b), b.fen()  # the first set does not change
        assert [int(x) for x in got[4:]] == _expected_tactics(b), b.fen()
        pins += bool(got[4] | got[5])
    assert pins >= 5  # the positions do hold pins for the check to mean something


def _best_capture(board: chess.Board, side: chess.Color) -> tuple[int, list[int]]:
    """What ``side`` wins with one capture by definition, and on which squares, one piece at a time with python-chess."""
    best = 0
    squares: list[int] = []
    for s in chess.SquareSet(board.occupied_co[not side] & ~board.kings):
        by = _attackers(board, side, s)
        if not by:
            continue
        value = VALUE[_kind(board, s)]
        won = value if not board.is_attacked_by(not side, s) else value - min(VALUE[t] for t in by)
        if won > 0 and won >= best:
            best, squares = won, (squares if won == best else []) + [s]
    return best, squares


TIER = {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 1, chess.ROOK: 2, chess.QUEEN: 3, chess.KING: 4}


def _capture_gain(board: chess.Board) -> int:
    """capture_gain by its definition: the best capture (lowest square on a tie), made by the cheapest attacker
    (lowest square on a tie), then the captured piece's value less the other side's best capture after it."""
    if board.is_check():
        return 0
    gain, squares = _best_capture(board, board.turn)
    if not gain:
        return 0
    target = min(squares)
    mover = min(board.attackers(board.turn, target), key=lambda s: (TIER[_kind(board, s)], s))
    value = VALUE[_kind(board, target)]
    after = board.copy(stack=False)
    after.set_piece_at(target, after.remove_piece_at(mover))
    return max(0, value - _best_capture(after, not board.turn)[0])


def test_capture_gain_matches_its_definition_with_python_chess():
    boards = [chess.Board(f) for f in PERFT_FENS + PIN_FENS] + random_game_boards(40, seed=13, max_plies=160)
    got = capture_gain(_bitboards(boards), np.array([b.turn for b in boards]))
    want = [_capture_gain(b) for b in boards]
    assert got.tolist() == want
    assert 0 < sum(g > 0 for g in want) < len(want)  # the positions hold both kinds


@pytest.mark.parametrize("fen,gain", [
    # a black queen on d5 that a white knight attacks, a white rook on h5 that the queen attacks: Nxd5 also ends the
    # threat to the rook, and for Black Qxh5 also takes the queen out of the knight's reach
    ("4k3/8/8/3q3R/8/2N5/8/4K3 w - - 0 1", 9),
    ("4k3/8/8/3q3R/8/2N5/8/4K3 b - - 0 1", 5),
    ("r5k1/3p4/2B5/8/8/8/8/4K3 b - - 0 1", 3),  # dxc6 takes the bishop that attacked the rook
    ("4k3/8/8/3p4/4N3/5P2/8/4K3 b - - 0 1", 3 - 1),  # dxe4 wins the knight, then fxe4 the pawn back
    ("4k3/8/8/3p4/4N3/8/8/4K3 b - - 0 1", 3),  # the same knight undefended
])
def test_capture_gain_plays_the_capture_and_counts_the_reply(fen, gain):
    board = chess.Board(fen)
    assert capture_gain(_bitboards([board]), np.array([board.turn])).tolist() == [gain] == [_capture_gain(board)]


def test_tactic_planes_need_the_attack_planes():
    import pytest

    from alphazero_hpc.config import ModelConfig
    from alphazero_hpc.errors import ConfigError

    with pytest.raises(ConfigError, match="model.tactic_planes"):
        ModelConfig(tactic_planes=True)
    assert ModelConfig(attack_planes=True, tactic_planes=True).attack_sets == 2
    assert ModelConfig(attack_planes=True).attack_sets == 1 and ModelConfig().attack_sets == 0


def test_a_piece_attacked_by_a_pawn_is_en_prise_even_when_defended():
    # White to move. The d4 knight is defended by the e3 pawn but attacked by the c5 pawn: en prise. The g4
    # pawn is attacked by the h5 bishop and undefended: en prise. The e3 pawn and a4 rook are attacked by nothing.
    # Black's h5 bishop is attacked by the g4 pawn and undefended; the c5 pawn is attacked by nothing.
    b = chess.Board("4k3/8/8/2p4b/R2N2P1/4P3/8/4K3 w - - 0 1")
    maps = attack_maps(_bitboards([b]), np.array([True]))[0]
    assert int(maps[2]) == chess.BB_D4 | chess.BB_G4
    assert int(maps[3]) == chess.BB_H5
    # With a black pawn on f6 defending nothing and the bishop moved to e7 behind it, nothing of black's hangs.
    b = chess.Board("4k3/4b3/5p2/2p5/R2N2P1/4P3/8/4K3 w - - 0 1")
    assert int(attack_maps(_bitboards([b]), np.array([True]))[0, 3]) == 0


def test_attack_planes_are_the_last_planes_and_mirror_for_black():
    boards = random_game_boards(6, seed=7, max_plies=60)[::5] + [chess.Board(f) for f in PIN_FENS[1:3]]
    for b in boards:
        bare = chess.Board(b.fen())
        mirrored = chess.Board(b.mirror().fen())
        p1, p2 = encode_boards([bare], 2, attacks=2)[0], encode_boards([mirrored], 2, attacks=2)[0]
        assert p1.shape == (num_planes(2, 2), 8, 8) == (num_planes(2) + 2 * ATTACK_PLANES, 8, 8)
        assert np.array_equal(p1[: num_planes(2)], encode_boards([bare], 2)[0])  # the plain planes do not move
        assert np.array_equal(p1[: num_planes(2, True)], encode_boards([bare], 2, attacks=True)[0])
        assert np.array_equal(p1[-2 * ATTACK_PLANES:], p2[-2 * ATTACK_PLANES:])  # seen from the side to move
        expected = _expected(bare) + _expected_tactics(bare)
        for plane, bits in zip(p1[-2 * ATTACK_PLANES:], expected):
            flip = 0 if bare.turn else 56
            want = np.zeros(64, np.float32)
            for s in chess.SquareSet(bits):
                want[s ^ flip] = 1.0
            assert np.array_equal(plane.reshape(64), want), bare.fen()


def test_a_run_with_attack_planes_plays_with_the_real_network_trains_and_checkpoints_them(tmp_path, tiny_args):
    """Through the pipeline: self-play with the network in search workers (the shared-memory slots carry the wider
    planes), training on those shards, and a checkpoint whose network reads 14 * H + 15 planes (both sets of maps)."""
    import subprocess
    import sys

    from alphazero_hpc.net.checkpoint import load_model
    from alphazero_hpc.store.paths import RunPaths

    from .conftest import run_cli

    on = ["--set", "model.attack_planes=true", "--set", "model.tactic_planes=true"]
    res = run_cli("selfplay", "--run-dir", str(tmp_path), "--num-tasks", "1", "--task", "0", *tiny_args, *on,
                  "--set", "selfplay.search_workers=1")
    assert res.returncode == 0, res.stderr[-2000:]
    train = subprocess.run([sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(tmp_path), "--generation", "0",
                            "--workers", "1"], capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr[-2000:]
    paths = RunPaths(tmp_path)
    model, _ = load_model(paths.model(1))
    assert model.cfg.attack_sets == 2 and model.stem[0].in_channels == num_planes(model.cfg.history, 2)
