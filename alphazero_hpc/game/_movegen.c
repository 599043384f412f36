/* Compiled chess positions for the search's hot path: copy-and-push, legal moves, check, insufficient material.
 *
 * python-chess is the reference for the rules, and this module follows it exactly, down to what the search can
 * observe: the state after a push (bitboards, castling rights cleaned as python-chess cleans them, the en-passant
 * square after every double pawn push, the move counters) and the ORDER of the legal moves (the search breaks
 * ties by move order, so a different order would change the games). The move generator therefore mirrors
 * python-chess's structure (pieces from the highest square down, castling, pawn captures, single and double
 * pushes, en passant; evasions when in check) and keeps the legal moves of that sequence; legality is decided by
 * making the move and asking whether the king is attacked. tests/test_movegen.py checks perft and random games
 * against python-chess.
 *
 * A move is an int: from | to << 6 | promotion << 12 (promotion: python-chess piece type 2..5, 0 for none);
 * castling is the king's two-square move (e1g1), as python-chess writes it for standard chess.
 * Standard chess only (no chess960, no variants).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef uint64_t U64;
enum { P = 0, N, B, R, Q, K };  /* index into bb[]; python-chess piece type = index + 1 */
#define WHITE 1
#define BLACK 0
#define BIT(s) (1ULL << (s))
#define RANK1 0x00000000000000FFULL
#define RANK8 0xFF00000000000000ULL
#define RANK3 0x0000000000FF0000ULL  /* where a white pawn's single push lands before it may go on to rank 4 */
#define RANK6 0x0000FF0000000000ULL  /* the same for black, to rank 5 */
#define DARK 0xAA55AA55AA55AA55ULL

static U64 KNIGHT_ATT[64], KING_ATT[64], PAWN_ATT[2][64], RAY[8][64], BETWEEN[64][64];
/* directions: 0 N +8, 1 E +1, 2 NE +9, 3 NW +7 (positive); 4 S -8, 5 W -1, 6 SW -9, 7 SE -7 (negative) */
static const int DF[8] = {0, 1, 1, -1, 0, -1, -1, 1}, DR[8] = {1, 0, 1, 1, -1, 0, -1, -1};

static inline int lsb(U64 b) { return __builtin_ctzll(b); }
static inline int msb(U64 b) { return 63 - __builtin_clzll(b); }
static inline int popcnt(U64 b) { return __builtin_popcountll(b); }

static void init_tables(void) {
    static const int kn[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};
    for (int s = 0; s < 64; s++) {
        int f = s & 7, r = s >> 3;
        for (int i = 0; i < 8; i++) {
            int tf = f + kn[i][0], tr = r + kn[i][1];
            if (tf >= 0 && tf < 8 && tr >= 0 && tr < 8) KNIGHT_ATT[s] |= BIT(tr * 8 + tf);
            tf = f + DF[i]; tr = r + DR[i];
            if (tf >= 0 && tf < 8 && tr >= 0 && tr < 8) KING_ATT[s] |= BIT(tr * 8 + tf);
            for (int d = 1; d < 8; d++) {
                tf = f + DF[i] * d; tr = r + DR[i] * d;
                if (tf < 0 || tf > 7 || tr < 0 || tr > 7) break;
                RAY[i][s] |= BIT(tr * 8 + tf);
            }
        }
        if (r < 7) {
            if (f > 0) PAWN_ATT[WHITE][s] |= BIT(s + 7);
            if (f < 7) PAWN_ATT[WHITE][s] |= BIT(s + 9);
        }
        if (r > 0) {
            if (f > 0) PAWN_ATT[BLACK][s] |= BIT(s - 9);
            if (f < 7) PAWN_ATT[BLACK][s] |= BIT(s - 7);
        }
    }
    for (int a = 0; a < 64; a++)
        for (int i = 0; i < 8; i++)
            for (U64 ray = RAY[i][a]; ray; ray &= ray - 1) {
                int b = lsb(ray);
                BETWEEN[a][b] = RAY[i][a] & ~RAY[i][b] & ~BIT(b);
            }
}

static inline U64 slide(int s, U64 occ, int d0, int d1) {
    U64 att = 0;
    for (int d = d0; d < d1; d++) {
        U64 ray = RAY[d][s], blk = ray & occ;
        if (blk) ray ^= RAY[d][d < 4 ? lsb(blk) : msb(blk)];
        att |= ray;
    }
    return att;
}
static inline U64 rook_att(int s, U64 occ) { return slide(s, occ, 0, 2) | slide(s, occ, 4, 6); }
static inline U64 bishop_att(int s, U64 occ) { return slide(s, occ, 2, 4) | slide(s, occ, 6, 8); }

typedef struct {
    PyObject_HEAD
    U64 bb[6];      /* P N B R Q K, both colours */
    U64 occ[2];     /* [BLACK], [WHITE] as python-chess's occupied_co */
    U64 castling;   /* python-chess's castling_rights: the rook squares */
    int ep;         /* en-passant square, -1 for none */
    int turn;       /* WHITE or BLACK */
    int halfmove, fullmove;
} Pos;

static PyTypeObject PosType;

/* Pieces of colour `by` that attack square s, sliders seen through occupancy `occ`. */
static inline U64 attackers(const Pos *p, int by, int s, U64 occ) {
    U64 them = p->occ[by];
    U64 rq = p->bb[R] | p->bb[Q], bq = p->bb[B] | p->bb[Q];
    return them & ((KNIGHT_ATT[s] & p->bb[N]) | (KING_ATT[s] & p->bb[K]) | (PAWN_ATT[!by][s] & p->bb[P])
                   | (rook_att(s, occ) & rq) | (bishop_att(s, occ) & bq));
}

static inline int king_sq(const Pos *p, int color) {
    U64 k = p->bb[K] & p->occ[color];
    return k ? msb(k) : -1;
}

static inline int piece_at(const Pos *p, int s) {
    U64 b = BIT(s);
    for (int t = 0; t < 6; t++) if (p->bb[t] & b) return t;
    return -1;
}

/* python-chess's clean_castling_rights for standard chess. */
static U64 clean_castling(const Pos *p) {
    U64 c = p->castling & p->bb[R];
    U64 w = c & RANK1 & p->occ[WHITE] & (BIT(0) | BIT(7));
    U64 b = c & RANK8 & p->occ[BLACK] & (BIT(56) | BIT(63));
    if (!(p->occ[WHITE] & p->bb[K] & BIT(4))) w = 0;
    if (!(p->occ[BLACK] & p->bb[K] & BIT(60))) b = 0;
    return w | b;
}

/* Board.push for a legal move of standard chess, into *d (a copy of *s). Callers pass generated moves (the
   generator's own legality test) or moves push checked with is_legal_move. */
static void do_move(const Pos *s, Pos *d, int move) {
    int from = move & 63, to = (move >> 6) & 63, promo = move >> 12;
    int us = s->turn, them = !us;
    U64 fb = BIT(from), tb = BIT(to);
    memcpy(d->bb, s->bb, sizeof d->bb);
    memcpy(d->occ, s->occ, sizeof d->occ);
    d->turn = them;
    d->ep = -1;
    d->halfmove = s->halfmove + 1;
    d->fullmove = s->fullmove + (us == BLACK);
    int piece = piece_at(s, from);
    int captured = (s->occ[them] & tb) ? piece_at(s, to) : -1;
    U64 rook_sq = BIT(to > from ? from + 3 : from - 4);
    int castle = piece == K && (to - from == 2 || from - to == 2) && (from == 4 || from == 60)
                 && (s->bb[R] & s->occ[us] & rook_sq);
    if (!castle) rook_sq = 0;
    /* castling rights: cleaned, then the squares touched (python-chess sees castling as king takes rook) */
    U64 cr = clean_castling(s) & ~fb & ~(castle ? rook_sq : tb);
    if (piece == K) cr &= us == WHITE ? ~RANK1 : ~RANK8;
    d->castling = cr;
    if (piece == P || captured >= 0) d->halfmove = 0;
    d->bb[piece] &= ~fb;
    d->occ[us] &= ~fb;
    if (captured >= 0) {
        d->bb[captured] &= ~tb;
        d->occ[them] &= ~tb;
    }
    if (piece == P) {
        int diff = to - from;
        if (diff == 16 && (from >> 3) == 1) d->ep = from + 8;
        else if (diff == -16 && (from >> 3) == 6) d->ep = from - 8;
        else if (to == s->ep && (diff == 7 || diff == 9 || diff == -7 || diff == -9) && captured < 0) {
            int cs = s->ep + (us == WHITE ? -8 : 8);  /* ep is on rank 3 or 6 (the constructor checks) */
            int ct = piece_at(s, cs);                  /* python-chess removes whatever stands there */
            if (ct >= 0) {
                d->bb[ct] &= ~BIT(cs);
                d->occ[0] &= ~BIT(cs);
                d->occ[1] &= ~BIT(cs);
            }
        }
    }
    if (castle) {
        int rto = to > from ? from + 1 : from - 1;
        d->bb[R] = (d->bb[R] & ~rook_sq) | BIT(rto);
        d->occ[us] = (d->occ[us] & ~rook_sq) | BIT(rto);
    }
    int placed = promo ? promo - 1 : piece;
    d->bb[placed] |= tb;
    d->occ[us] |= tb;
}

/* ---- pseudo-legal generation in python-chess's order; each move kept if legal ---- */
/* Legal moves only; at most 16 pieces a side (the constructor checks): 15 queens and a king stay under 512. */
typedef struct { int n; int m[512]; } MoveList;

static inline int legal(const Pos *p, int move) {
    Pos t;
    do_move(p, &t, move);
    int k = king_sq(&t, p->turn);
    return k < 0 || !attackers(&t, !p->turn, k, t.occ[0] | t.occ[1]);
}

static inline void add(const Pos *p, MoveList *ml, int from, int to, int promo) {
    int mv = from | (to << 6) | (promo << 12);
    if (legal(p, mv)) ml->m[ml->n++] = mv;
}

static inline void add_pawn(const Pos *p, MoveList *ml, int from, int to) {
    int rank = to >> 3;
    if (rank == 0 || rank == 7) {
        add(p, ml, from, to, 5); add(p, ml, from, to, 4); add(p, ml, from, to, 3); add(p, ml, from, to, 2);
    } else {
        add(p, ml, from, to, 0);
    }
}

/* Squares a knight, bishop, rook, queen or king on s attacks (pawns have their own loops in gen_pseudo). */
static U64 piece_attacks(int s, int piece, U64 occ) {
    switch (piece) {
        case N: return KNIGHT_ATT[s];
        case B: return bishop_att(s, occ);
        case R: return rook_att(s, occ);
        case Q: return rook_att(s, occ) | bishop_att(s, occ);
        default: return KING_ATT[s];
    }
}

static void gen_ep(const Pos *p, MoveList *ml, U64 from_mask, U64 to_mask) {
    if (p->ep <= 0 || !(BIT(p->ep) & to_mask)) return;  /* python-chess: `if not self.ep_square` */
    U64 occ = p->occ[0] | p->occ[1];
    if (BIT(p->ep) & occ) return;
    U64 cap = p->bb[P] & p->occ[p->turn] & from_mask & PAWN_ATT[!p->turn][p->ep] & (0xFFULL << (p->turn ? 32 : 24));
    for (; cap; cap &= ~BIT(msb(cap))) add(p, ml, msb(cap), p->ep, 0);
}

static void gen_castling(const Pos *p, MoveList *ml) {
    int us = p->turn;
    U64 back = us == WHITE ? RANK1 : RANK8;
    U64 king = p->occ[us] & p->bb[K] & back;
    if (!king) return;
    king &= -king;
    int ks = lsb(king);
    U64 occ = p->occ[0] | p->occ[1];
    for (U64 cands = clean_castling(p) & back; cands; cands &= ~BIT(msb(cands))) {
        int rs = msb(cands);
        U64 rook = BIT(rs);
        int a_side = rs < ks;
        int kto = (us == WHITE ? 0 : 56) + (a_side ? 2 : 6), rto = (us == WHITE ? 0 : 56) + (a_side ? 3 : 5);
        U64 kpath = BETWEEN[ks][kto], rpath = BETWEEN[rs][rto];
        if ((occ ^ king ^ rook) & (kpath | rpath | BIT(kto) | BIT(rto))) continue;
        int attacked = 0;
        for (U64 path = kpath | king; path && !attacked; path &= path - 1)
            attacked = attackers(p, !us, lsb(path), occ ^ king) != 0;
        if (attacked || attackers(p, !us, kto, occ ^ king ^ rook ^ BIT(rto))) continue;
        ml->m[ml->n++] = ks | (kto << 6);  /* legal by the tests above */
    }
}

static void gen_pseudo(const Pos *p, MoveList *ml, U64 from_mask, U64 to_mask) {
    int us = p->turn;
    U64 ours = p->occ[us], occ = p->occ[0] | p->occ[1];
    for (U64 pcs = ours & ~p->bb[P] & from_mask; pcs; pcs &= ~BIT(msb(pcs))) {
        int s = msb(pcs);
        int piece = piece_at(p, s);
        for (U64 t = piece_attacks(s, piece, occ) & ~ours & to_mask; t; t &= ~BIT(msb(t))) add(p, ml, s, msb(t), 0);
    }
    if (from_mask & p->bb[K]) gen_castling(p, ml);
    U64 pawns = p->bb[P] & ours & from_mask;
    if (!pawns) return;
    for (U64 c = pawns; c; c &= ~BIT(msb(c))) {
        int s = msb(c);
        for (U64 t = PAWN_ATT[us][s] & p->occ[!us] & to_mask; t; t &= ~BIT(msb(t))) add_pawn(p, ml, s, msb(t));
    }
    U64 single, dbl;
    if (us == WHITE) {
        single = (pawns << 8) & ~occ;
        dbl = ((single & RANK3) << 8) & ~occ;
    } else {
        single = (pawns >> 8) & ~occ;
        dbl = ((single & RANK6) >> 8) & ~occ;
    }
    single &= to_mask;
    dbl &= to_mask;
    for (; single; single &= ~BIT(msb(single))) {
        int t = msb(single);
        add_pawn(p, ml, t + (us == BLACK ? 8 : -8), t);
    }
    for (; dbl; dbl &= ~BIT(msb(dbl))) {
        int t = msb(dbl);
        add(p, ml, t + (us == BLACK ? 16 : -16), t, 0);
    }
    if (p->ep > 0) gen_ep(p, ml, from_mask, to_mask);
}

static void gen_legal(const Pos *p, MoveList *ml) {
    ml->n = 0;
    int us = p->turn;
    int k = king_sq(p, us);
    U64 occ = p->occ[0] | p->occ[1];
    U64 checkers = k >= 0 ? attackers(p, !us, k, occ) : 0;
    if (!checkers) {
        gen_pseudo(p, ml, ~0ULL, ~0ULL);
        return;
    }
    /* evasions: king moves, then (one checker) captures and blocks, then the checking pawn taken en passant */
    for (U64 t = KING_ATT[k] & ~p->occ[us]; t; t &= ~BIT(msb(t))) add(p, ml, k, msb(t), 0);
    int checker = msb(checkers);
    if (BIT(checker) == checkers) {
        U64 target = BETWEEN[k][checker] | checkers;
        gen_pseudo(p, ml, ~p->bb[K], target);
        if (p->ep > 0 && !(BIT(p->ep) & target) && p->ep + (us == WHITE ? -8 : 8) == checker)
            gen_ep(p, ml, ~0ULL, ~0ULL);
    }
}

/* ---- the Python type ---- */
static Pos *new_pos(void) { return PyObject_New(Pos, &PosType); }

static void pos_dealloc(Pos *p) { PyObject_Free(p); }

static PyObject *pos_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"pawns", "knights", "bishops", "rooks", "queens", "kings", "white", "black", "turn",
                            "castling_rights", "ep_square", "halfmove_clock", "fullmove_number", NULL};
    unsigned long long b[8], cr;
    int turn, half, full;
    PyObject *ep;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKKKKKKpKOii", names, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                                     &b[6], &b[7], &turn, &cr, &ep, &half, &full))
        return NULL;
    int eps = -1;
    if (ep != Py_None) {
        long e = PyLong_AsLong(ep);
        if (e == -1 && PyErr_Occurred()) return NULL;
        eps = e < 0 || e > 63 ? 64 : (int)e;
        if (eps > 63) {
            PyErr_SetString(PyExc_ValueError, "ep_square must be None or 0..63");
            return NULL;
        }
    }
    U64 all = b[6] | b[7], seen = 0;
    int overlap = (b[6] & b[7]) != 0;
    for (int i = 0; i < 6; i++) {
        overlap |= (seen & b[i]) != 0;
        seen |= b[i];
    }
    if (overlap || seen != all) {
        PyErr_SetString(PyExc_ValueError, "piece and colour bitboards disagree");
        return NULL;
    }
    if (popcnt(b[5] & b[6]) != 1 || popcnt(b[5] & b[7]) != 1 || popcnt(b[6]) > 16 || popcnt(b[7]) > 16) {
        PyErr_SetString(PyExc_ValueError, "a position needs one king a side and at most 16 pieces a side");
        return NULL;
    }
    if (eps >= 0 && (eps >> 3) != (turn ? 5 : 2)) {
        PyErr_SetString(PyExc_ValueError, "ep_square must be on the sixth rank (white to move) or the third");
        return NULL;
    }
    if (half < 0 || half > (1 << 24) || full < 0 || full > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "halfmove_clock and fullmove_number must be in 0..2**24");
        return NULL;
    }
    Pos *p = (Pos *)type->tp_alloc(type, 0);
    if (!p) return NULL;
    for (int i = 0; i < 6; i++) p->bb[i] = b[i];
    p->occ[WHITE] = b[6];
    p->occ[BLACK] = b[7];
    p->turn = turn ? WHITE : BLACK;
    p->castling = cr;
    p->ep = eps;
    p->halfmove = half;
    p->fullmove = full;
    return (PyObject *)p;
}

static PyObject *pos_legal_moves(Pos *p, PyObject *unused) {
    MoveList ml;
    gen_legal(p, &ml);
    PyObject *l = PyList_New(ml.n);
    if (!l) return NULL;
    for (int i = 0; i < ml.n; i++) {
        PyObject *v = PyLong_FromLong(ml.m[i]);
        if (!v) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *pos_has_legal_moves(Pos *p, PyObject *unused) {
    MoveList ml;
    gen_legal(p, &ml);
    return PyBool_FromLong(ml.n > 0);
}

/* Whether mv is one of the legal moves of p that python-chess would list, and takes no king (a position where the
   side to move could take the enemy king is not one a game reaches). Out of check only the moves of mv's from-square
   to its to-square are generated (a few hundred ns); in check, all evasions. */
static int is_legal_move(const Pos *p, long mv) {
    if (mv < 0 || mv >= (6 << 12) || (mv >> 12) == 1) return 0;
    int from = (int)(mv & 63), to = (int)((mv >> 6) & 63);
    if (!(p->occ[p->turn] & BIT(from)) || (p->bb[K] & BIT(to))) return 0;
    MoveList ml;
    int k = king_sq(p, p->turn);
    if (k >= 0 && attackers(p, !p->turn, k, p->occ[0] | p->occ[1])) {
        gen_legal(p, &ml);
    } else {
        ml.n = 0;
        gen_pseudo(p, &ml, BIT(from), BIT(to));
    }
    for (int i = 0; i < ml.n; i++)
        if (ml.m[i] == mv) return 1;
    return 0;
}

static PyObject *pos_push(Pos *p, PyObject *arg) {
    long mv = PyLong_AsLong(arg);
    if (mv == -1 && PyErr_Occurred()) return NULL;
    if (!is_legal_move(p, mv)) {
        PyErr_Format(PyExc_ValueError, "push: %ld is not a legal move in this position", mv);
        return NULL;
    }
    Pos *d = new_pos();
    if (!d) return NULL;
    do_move(p, d, (int)mv);
    return (PyObject *)d;
}

/* The first legal move (python-chess's order) that checkmates, or -1. Only moves that give check are followed. */
static int mating_move(const Pos *p) {
    MoveList ml, reply;
    gen_legal(p, &ml);
    for (int i = 0; i < ml.n; i++) {
        Pos t;
        do_move(p, &t, ml.m[i]);
        int k = king_sq(&t, t.turn);
        if (k < 0 || !attackers(&t, !t.turn, k, t.occ[0] | t.occ[1])) continue;
        gen_legal(&t, &reply);
        if (reply.n == 0) return ml.m[i];
    }
    return -1;
}

static PyObject *pos_mating_move(Pos *p, PyObject *unused) {
    int mv = mating_move(p);
    if (mv < 0) Py_RETURN_NONE;
    return PyLong_FromLong(mv);
}

static PyObject *pos_is_check(Pos *p, PyObject *unused) {
    int k = king_sq(p, p->turn);
    return PyBool_FromLong(k >= 0 && attackers(p, !p->turn, k, p->occ[0] | p->occ[1]) != 0);
}

static int insufficient(const Pos *p, int c) {
    U64 mine = p->occ[c];
    if (mine & (p->bb[P] | p->bb[R] | p->bb[Q])) return 0;
    if (mine & p->bb[N]) return popcnt(mine) <= 2 && !(p->occ[!c] & ~p->bb[K] & ~p->bb[Q]);
    if (mine & p->bb[B]) {
        int same = !(p->bb[B] & DARK) || !(p->bb[B] & ~DARK);
        return same && !p->bb[P] && !p->bb[N];
    }
    return 1;
}

static PyObject *pos_is_insufficient_material(Pos *p, PyObject *unused) {
    return PyBool_FromLong(insufficient(p, WHITE) && insufficient(p, BLACK));
}

static PyObject *pos_key(Pos *p, PyObject *unused) {
    /* game.encoding.position_key: what python-chess compares for repetitions (its _transposition_key): cleaned
       castling rights, and the en-passant square only when an en-passant capture is legal */
    MoveList ml;
    ml.n = 0;
    if (p->ep > 0) gen_ep(p, &ml, ~0ULL, ~0ULL);
    PyObject *ep = ml.n ? PyLong_FromLong(p->ep) : (Py_INCREF(Py_None), Py_None);
    return Py_BuildValue("(KKKKKKKKOKN)", p->bb[P], p->bb[N], p->bb[B], p->bb[R], p->bb[Q], p->bb[K], p->occ[WHITE],
                         p->occ[BLACK], p->turn ? Py_True : Py_False, clean_castling(p), ep);
}

/* The closures of the attribute getters: which bitboard (the piece indices P..K, then these), which number. */
enum { GET_WHITE = 6, GET_BLACK, GET_CASTLING };
enum { GET_TURN, GET_EP_SQUARE, GET_HALFMOVE, GET_FULLMOVE, GET_PLY };

static PyObject *pos_getbb(Pos *p, void *which) {
    intptr_t i = (intptr_t)which;
    U64 v = i <= K ? p->bb[i] : i == GET_WHITE ? p->occ[WHITE] : i == GET_BLACK ? p->occ[BLACK] : p->castling;
    return PyLong_FromUnsignedLongLong(v);
}
static PyObject *pos_getint(Pos *p, void *which) {
    switch ((intptr_t)which) {
        case GET_TURN: return PyBool_FromLong(p->turn);
        case GET_EP_SQUARE: if (p->ep < 0) Py_RETURN_NONE; return PyLong_FromLong(p->ep);
        case GET_HALFMOVE: return PyLong_FromLong(p->halfmove);
        case GET_FULLMOVE: return PyLong_FromLong(p->fullmove);
        default: return PyLong_FromLong(2 * (p->fullmove - 1) + (p->turn == BLACK));  /* GET_PLY */
    }
}

static PyGetSetDef pos_getset[] = {
    {"pawns", (getter)pos_getbb, NULL, NULL, (void *)P}, {"knights", (getter)pos_getbb, NULL, NULL, (void *)N},
    {"bishops", (getter)pos_getbb, NULL, NULL, (void *)B}, {"rooks", (getter)pos_getbb, NULL, NULL, (void *)R},
    {"queens", (getter)pos_getbb, NULL, NULL, (void *)Q}, {"kings", (getter)pos_getbb, NULL, NULL, (void *)K},
    {"white", (getter)pos_getbb, NULL, NULL, (void *)GET_WHITE}, {"black", (getter)pos_getbb, NULL, NULL, (void *)GET_BLACK},
    {"castling_rights", (getter)pos_getbb, NULL, NULL, (void *)GET_CASTLING},
    {"turn", (getter)pos_getint, NULL, NULL, (void *)GET_TURN},
    {"ep_square", (getter)pos_getint, NULL, NULL, (void *)GET_EP_SQUARE},
    {"halfmove_clock", (getter)pos_getint, NULL, NULL, (void *)GET_HALFMOVE},
    {"fullmove_number", (getter)pos_getint, NULL, NULL, (void *)GET_FULLMOVE},
    {"ply", (getter)pos_getint, NULL, NULL, (void *)GET_PLY},
    {NULL}};

static PyMethodDef pos_methods[] = {
    {"legal_moves", (PyCFunction)pos_legal_moves, METH_NOARGS, "The legal moves (ints) in python-chess's order."},
    {"has_legal_moves", (PyCFunction)pos_has_legal_moves, METH_NOARGS, "Whether the side to move has a legal move."},
    {"push", (PyCFunction)pos_push, METH_O, "The position after a legal move (an int); ValueError for any other int."},
    {"is_check", (PyCFunction)pos_is_check, METH_NOARGS, "Whether the side to move is in check."},
    {"mating_move", (PyCFunction)pos_mating_move, METH_NOARGS,
     "The first legal move (python-chess's order) that checkmates, or None."},
    {"is_insufficient_material", (PyCFunction)pos_is_insufficient_material, METH_NOARGS,
     "python-chess's Board.is_insufficient_material."},
    {"key", (PyCFunction)pos_key, METH_NOARGS, "The position key of game.encoding.position_key."},
    {NULL}};

static PyTypeObject PosType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alphazero_hpc.game._movegen.Position",
    .tp_basicsize = sizeof(Pos),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An immutable chess position (standard chess); moves are ints from | to << 6 | promotion << 12.",
    .tp_new = pos_new,
    .tp_dealloc = (destructor)pos_dealloc,
    .tp_methods = pos_methods,
    .tp_getset = pos_getset,
};

static unsigned long long perft(const Pos *p, int depth) {
    MoveList ml;
    gen_legal(p, &ml);
    if (depth <= 1) return depth == 1 ? (unsigned long long)ml.n : 1ULL;
    unsigned long long total = 0;
    for (int i = 0; i < ml.n; i++) {
        Pos c;
        do_move(p, &c, ml.m[i]);
        total += perft(&c, depth - 1);
    }
    return total;
}

static PyObject *py_perft(PyObject *self, PyObject *args) {
    PyObject *obj;
    int depth;
    if (!PyArg_ParseTuple(args, "O!i", &PosType, &obj, &depth)) return NULL;
    unsigned long long n;
    Py_BEGIN_ALLOW_THREADS
    n = perft((Pos *)obj, depth);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(n);
}

static PyMethodDef module_methods[] = {
    {"perft", py_perft, METH_VARARGS, "perft(position, depth): leaf nodes of the legal move tree."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_movegen", "Compiled chess positions (see the source).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__movegen(void) {
    init_tables();
    if (PyType_Ready(&PosType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&PosType);
    if (PyModule_AddObject(m, "Position", (PyObject *)&PosType) < 0) {
        Py_DECREF(&PosType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
