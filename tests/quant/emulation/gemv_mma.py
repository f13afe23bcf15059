# Pure-Python emulation of src/ops/quant/linear.cuh's tensor-core GEMVs, linear_gemv_mma_kernel (KERNELKIT_TUNE
# gemv_mma=1 / 2; INT4 and, i8_warp_tile, INT8 weights) and linear_fp8_gemv_mma_kernel (fp8_gemv=2, m16n8k32 over byte
# codes: fp8_warp_tile below), and of linear_tc.cuh's INT4 B fragments (tc_kernel), lane by lane, in float64: the INT4
# kernel layout (include/kernelkit/ops/quant.hpp; pack_int4 below places each word by its offset formula, as
# kernelkit.formats.pack_int4 and quantize_weight do), each lane's 16-byte share of a row tile's region (rows g and
# g + 8), the A pairs of int4_pair_of (raw nibbles j and j + 4 of word >> 4j, biased by 8) or the tile kernel's B pairs
# of int4_pair_bits, less the zero points, the pairs of x, mma.sync m16n8k16 as the PTX ISA defines its fragments
# (written from the ISA, not from the kernels), the group scales (two groups a region for groups of 32), the row and
# token tiles, the warps' k split and the block's sums. A wrong fragment index, word, pair, lane slot or group shows up
# as a large error against the naive product. The test command runs it (tests/quant/test_quant_emulation.py); by hand
# (~1.5 s):
#     python3 tests/quant/emulation/gemv_mma.py
import random

NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]  # value j of a word sits in nibble NIBBLE[j] (include/kernelkit/ops/quant.hpp)


def pack_word(values):
    """8 signed INT4 values -> their 32-bit word (value j in the nibble at bit 4 NIBBLE[j])."""
    word = 0
    for j in range(8):
        word |= (values[j] & 0xF) << (4 * NIBBLE[j])
    return word


def word_offset(r, i, k):
    """The byte offset of row r's word i (values k = 8i .. 8i + 7) in the INT4 kernel layout (n % 16 == 0, k % 64 ==
    0): [n / 16 row tiles][k / 64 regions][32 lanes (g, t), lane 4g + t][16 bytes: row 16 tile + g's words 8R + 2t,
    8R + 2t + 1, then row 16 tile + g + 8's]."""
    tile, h, g = r // 16, (r % 16) // 8, r % 8
    R, t, w = i // 8, (i % 8) // 2, i % 2
    return ((tile * (k // 64) + R) * 32 + 4 * g + t) * 16 + 8 * h + 4 * w


def pack_int4(vals, n, k):
    """signed INT4 values [n][k] -> the bytes of the kernel layout (one flat list, n k / 2 bytes)."""
    assert n % 16 == 0 and k % 64 == 0, (n, k)
    out = [None] * (n * k // 2)
    for r in range(n):
        for i in range(k // 8):
            word, off = pack_word(vals[r][8 * i:8 * i + 8]), word_offset(r, i, k)
            for b in range(4):
                out[off + b] = (word >> (8 * b)) & 0xFF
    assert None not in out
    return out


def word_at(q, off):
    """The little-endian 32-bit word at byte `off` of q."""
    return sum(q[off + b] << (8 * b) for b in range(4))


def pair_of(word, j, zero):
    """int4_pair_of: values (2j, 2j + 1) of the word as ((word >> 4j) & 0x000F000F) ^ 8 - 8 - zero, low half first."""
    bits = ((word >> (4 * j)) & 0x000F000F) ^ 0x00080008
    return ((bits & 0xF) - 8 - zero, ((bits >> 16) & 0xF) - 8 - zero)


def product(C, Am, Bm):
    """D = Am Bm + C on the 16 x 8 accumulator tile, C and D as lanes' fragments c0..c3 (rows g, g + 8; columns
    2t, 2t + 1): the part both MMA shapes share."""
    Cm = [[0.0] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        Cm[g][2 * t], Cm[g][2 * t + 1], Cm[g + 8][2 * t], Cm[g + 8][2 * t + 1] = C[lane]
    D = [[Cm[i][j] + sum(Am[i][kk] * Bm[kk][j] for kk in range(len(Bm))) for j in range(8)] for i in range(16)]
    return [[D[l // 4][2 * (l % 4)], D[l // 4][2 * (l % 4) + 1], D[l // 4 + 8][2 * (l % 4)],
             D[l // 4 + 8][2 * (l % 4) + 1]] for l in range(32)]


def mma(C, A, B0, B1):
    """D = A B + C for m16n8k16: A[lane] = 4 pairs (a0..a3), B0 / B1[lane] pairs, C[lane] = c0..c3 (PTX ISA layouts)."""
    Am = [[0.0] * 16 for _ in range(16)]
    Bm = [[0.0] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        a = A[lane]
        Am[g][2 * t], Am[g][2 * t + 1] = a[0]
        Am[g + 8][2 * t], Am[g + 8][2 * t + 1] = a[1]
        Am[g][2 * t + 8], Am[g][2 * t + 9] = a[2]
        Am[g + 8][2 * t + 8], Am[g + 8][2 * t + 9] = a[3]
        Bm[2 * t][g], Bm[2 * t + 1][g] = B0[lane]
        Bm[2 * t + 8][g], Bm[2 * t + 9][g] = B1[lane]
    return product(C, Am, Bm)


def scale_into(acc, part, scales, row_lo, row_hi, grp_lo, grp_hi=None):
    """acc += part * the rows' scales of group grp_lo (c0, c1: row_lo; c2, c3: row_hi), in place."""
    sl, sh = scales[row_lo][grp_lo], scales[row_hi][grp_lo if grp_hi is None else grp_hi]
    acc[0] += part[0] * sl
    acc[1] += part[1] * sl
    acc[2] += part[2] * sh
    acc[3] += part[3] * sh


def warp_tile(x, q, scales, zeros, n, k, m, n0, nt, warp, shift, k_warps, U, g32):
    """One warp's C fragments (acc[lane] = c0..c3) of the row tile at row n0 (clamped to the last tile, as the kernel
    reads row tiles past n) and token tile nt: its regions' MMAs. Region r: lane (g, t) loads the 16 bytes at
    ((tile (k / 64) + r) 32 + lane) 16, w_lo = bytes 0-7 (row g's words 8r + 2t, 8r + 2t + 1 as .x, .y), w_hi =
    bytes 8-15 (row g + 8's), and token g's x at 64r + 16t .. + 7 (pairs xs[0..3]) and 64r + 16t + 8 .. + 15
    (xs[4..7]). k-step s: lo = w_lo.x for s < 2 else w_lo.y (hi alike), j = 2 (s % 2), A = the pairs j of lo and
    hi, then j + 1 of both, less the zero points; B = xs[2s], xs[2s + 1]. g32 (groups of 32): lane t's values are in
    group 2r + t / 2 (its zero points that group's), and each k-step is two MMAs, partA on the A of lanes t < 2 (zeros
    for the others), partB on those of lanes t >= 2, scaled by groups 2r and 2r + 1; else one group a region."""
    regions = k // 64
    tile = min(n0 // 16, (n - 1) // 16)
    acc = [[0.0] * 4 for _ in range(32)]
    for r0 in range(warp, regions, k_warps * U):
        for u in range(U):
            r = r0 + u * k_warps
            if r >= regions:
                continue
            w_lo, w_hi, xs, zl, zh = [], [], [], [], []
            for lane in range(32):
                g, t = lane // 4, lane % 4
                base = ((tile * regions + r) * 32 + lane) * 16
                w_lo.append((word_at(q, base), word_at(q, base + 4)))
                w_hi.append((word_at(q, base + 8), word_at(q, base + 12)))
                xrow = x[min(8 * nt + g, m - 1)]
                x0, x1 = 64 * r + 16 * t, 64 * r + 16 * t + 8
                xs.append([(xrow[x0 + 2 * i], xrow[x0 + 2 * i + 1]) for i in range(4)] +
                          [(xrow[x1 + 2 * i], xrow[x1 + 2 * i + 1]) for i in range(4)])
                grp = 2 * r + t // 2 if g32 else r >> shift
                zl.append(zeros[16 * tile + g][grp] if zeros else 0)
                zh.append(zeros[16 * tile + g + 8][grp] if zeros else 0)
            part_a = [[0.0] * 4 for _ in range(32)]
            part_b = [[0.0] * 4 for _ in range(32)]
            for s in range(4):
                j = 2 * (s % 2)
                A, B0, B1 = [], [], []
                for lane in range(32):
                    lo, hi = w_lo[lane][s // 2], w_hi[lane][s // 2]
                    A.append([pair_of(lo, j, zl[lane]), pair_of(hi, j, zh[lane]), pair_of(lo, j + 1, zl[lane]),
                              pair_of(hi, j + 1, zh[lane])])
                    B0.append(xs[lane][2 * s])
                    B1.append(xs[lane][2 * s + 1])
                if g32:
                    none = [(0, 0)] * 4
                    part_a = mma(part_a, [A[l] if l % 4 < 2 else none for l in range(32)], B0, B1)
                    part_b = mma(part_b, [none if l % 4 < 2 else A[l] for l in range(32)], B0, B1)
                else:
                    part_a = mma(part_a, A, B0, B1)
            for lane in range(32):
                row_lo, row_hi = 16 * tile + lane // 4, 16 * tile + lane // 4 + 8
                if g32:
                    scale_into(acc[lane], part_a[lane], scales, row_lo, row_hi, 2 * r)
                    scale_into(acc[lane], part_b[lane], scales, row_lo, row_hi, 2 * r + 1)
                else:
                    scale_into(acc[lane], part_a[lane], scales, row_lo, row_hi, r >> shift)
    return acc


def run_blocks(n, m, k_warps, tile, MT=1):
    """The block loop the GEMVs share: blocks of MT row tiles of 16 rows; tile(n0, nt, warp) gives one warp's C
    fragments (acc[lane] = c0..c3) of the row tile at row n0 and token tile nt; they go to the block's partials
    [warp][16 MT rows][tokens] (element e of lane (g, t) in row tile mt: row 16 mt + g + 8 (e // 2), token 8 nt + 2t +
    e % 2) and each output is their sum over the warps (rows past n and tokens past m dropped)."""
    NT = 1 if m <= 8 else 2 if m <= 16 else 4  # gemv_mma=2: four tiles for m 17-32
    tokens, rows = 8 * NT, 16 * MT
    out = {}
    for n0 in range(0, n, rows):
        partials = [[0.0] * (rows * tokens) for _ in range(k_warps)]
        for warp in range(k_warps):
            for mt in range(MT):
                for nt in range(NT):
                    acc = tile(n0 + 16 * mt, nt, warp)
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        for e in range(4):
                            partials[warp][(16 * mt + g + 8 * (e // 2)) * tokens + 8 * nt + 2 * t + e % 2] = \
                                acc[lane][e]
        for i in range(rows * tokens):
            r, tok = i // tokens, i % tokens
            if n0 + r < n and tok < m:
                assert (tok, n0 + r) not in out
                out[(tok, n0 + r)] = sum(partials[w][i] for w in range(k_warps))
    return out


def kernel(x, q, scales, zeros, n, k, m, group, k_warps, U=None, MT=1):
    """out[(token, row)] as linear_gemv_mma_kernel computes it (fp64) from q in the INT4 kernel layout; U: regions a
    batch (mma_gemv_unroll); MT: row tiles a block."""
    shift = group.bit_length() - 1 - 6
    U = U or (4 if m <= 16 else 2)
    return run_blocks(n, m, k_warps, lambda n0, nt, warp: warp_tile(
        x, q, scales, zeros, n, k, m, n0, nt, warp, shift, k_warps, U, group == 32), MT)


def random_int4(n, k, m, group, with_zeros, seed):
    """Random signed INT4 values [n][k], scales and zero points [n][k / group] (mostly near the codes, a quarter
    across int8) and x [m][k]."""
    rnd = random.Random(seed)
    groups = k // group
    vals = [[rnd.randrange(-8, 8) for _ in range(k)] for _ in range(n)]
    scales = [[rnd.uniform(0.5, 1.5) for _ in range(groups)] for _ in range(n)]
    zeros = [[rnd.randrange(-128, 128) if rnd.random() < 0.25 else rnd.randrange(-8, 9) for _ in range(groups)]
             for _ in range(n)] if with_zeros else None
    x = [[rnd.uniform(-1, 1) for _ in range(k)] for _ in range(m)]
    return vals, scales, zeros, x


def worst_error(got, x, vals, scales, zeros, n, k, m, group):
    """The largest |got - the naive float64 product| over every (token, row); every output present."""
    assert len(got) == n * m, (len(got), n * m)
    worst = 0.0
    for tok in range(m):
        for row in range(n):
            want = sum(x[tok][j] * scales[row][j // group] * (vals[row][j] - (zeros[row][j // group] if zeros else 0))
                       for j in range(k))
            worst = max(worst, abs(got[(tok, row)] - want))
    return worst


def check(n, k, m, group, k_warps, with_zeros, seed, U=None, MT=1):
    vals, scales, zeros, x = random_int4(n, k, m, group, with_zeros, seed)
    got = kernel(x, pack_int4(vals, n, k), scales, zeros, n, k, m, group, k_warps, U, MT)
    worst = worst_error(got, x, vals, scales, zeros, n, k, m, group)
    assert worst < 1e-9, f"n{n} k{k} m{m} g{group} k_warps {k_warps} MT {MT} zeros {with_zeros}: worst error {worst}"
    print(f"ok n{n} k{k} m{m} group {group} k_warps {k_warps} MT {MT} zeros {with_zeros}: worst error {worst:.2e}")


def int4_pair_bits(word, t):
    """quant_common.cuh int4_pair_bits: values 2t, 2t + 1 of the word biased by 8 (u = value + 8), in bits 0-3 and
    16-19."""
    return ((word ^ 0x88888888) >> (4 * t)) & 0x000F000F


def tc_b_pair(word, t, zero):
    """int4_pair of int4_pair_bits(word, t): the B pair (values 2t, 2t + 1 of the word) less the zero point."""
    bits = int4_pair_bits(word, t)
    return ((bits & 0xF) - 8 - zero, ((bits >> 16) & 0xF) - 8 - zero)


def tc_kernel(x, q, scales, zeros, n, k, m, group):
    """out[(token, row)] as linear_tc_kernel<kBits 4> computes it (fp64) for m <= 16 (MT 1, no split-K): blocks of 16
    tokens x 128 rows, k tiles of 64 values (one region of the layout each). Per k tile R the block copies the region R
    of its 8 row tiles (bn / 16 .. bn / 16 + 7; tiles past n zero-filled) into shared memory [8][32 lane slots][16
    bytes]. Warp wn (rows 32 wn .. 32 wn + 31, row tiles 2wn, 2wn + 1), n-tile nt (rows 32 wn + 8 nt ..), k-step kk:
    lane (g, t) reads the 16 bytes of row tile jj = 2wn + nt // 2 at lane slot 4g + kk (row g's words 2kk, 2kk + 1 of
    the region in bytes 0-7, row g + 8's in 8-15): n-tile nt takes .x, .y when even, .z, .w when odd; b0 =
    int4_pair(int4_pair_bits(first word, t)) (k labels 2t, 2t + 1), b1 the same of the second word (labels 2t + 8,
    2t + 9), less the zero point of the lane's row (8 nt + g) in the step's group. x is A with the standard labels
    (token g / g + 8, k 16 kk + 2t ..). Group sums scaled at the group's last k-step: groups of 64 or 128 once a tile,
    groups of 32 (group 2R + kk // 2) after steps 1 and 3."""
    assert m <= 16 and n % 16 == 0 and k % 64 == 0
    regions, tiles, steps = k // 64, n // 16, 2 if group == 32 else 4
    out = {}
    for bn in range(0, n, 128):
        accs = [[[[0.0] * 4 for _ in range(32)] for _ in range(4)] for _ in range(4)]  # [warp][nt][lane]
        for R in range(regions):
            smem = [[[0] * 16 for _ in range(32)] for _ in range(8)]
            for jj in range(8):
                tile = bn // 16 + jj
                if tile < tiles:
                    base = (tile * regions + R) * 512
                    smem[jj] = [q[base + 16 * s:base + 16 * s + 16] for s in range(32)]
            for wn in range(4):
                parts = [[[0.0] * 4 for _ in range(32)] for _ in range(4)]
                for kk in range(4):
                    grp = (64 * R + 16 * kk) // group
                    A = []
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        xlo, xhi = x[min(g, m - 1)], x[min(g + 8, m - 1)]  # tokens past m: anything, dropped
                        c = 64 * R + 16 * kk + 2 * t
                        A.append([(xlo[c], xlo[c + 1]), (xhi[c], xhi[c + 1]), (xlo[c + 8], xlo[c + 9]),
                                  (xhi[c + 8], xhi[c + 9])])
                    for nt in range(4):
                        jj = 2 * wn + nt // 2
                        B0, B1 = [], []
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            v = smem[jj][4 * g + kk]
                            words = [word_at(v, 4 * i) for i in range(4)]  # .x .y .z .w
                            first, second = words[2 * (nt % 2)], words[2 * (nt % 2) + 1]
                            row = min(bn + 32 * wn + 8 * nt + g, n - 1)
                            z = zeros[row][grp] if zeros else 0
                            B0.append(tc_b_pair(first, t, z))
                            B1.append(tc_b_pair(second, t, z))
                        parts[nt] = mma(parts[nt], A, B0, B1)
                    if (kk + 1) % steps == 0:  # the group's last k-step: acc += part * s[col, grp]
                        for nt in range(4):
                            for lane in range(32):
                                t = lane % 4
                                for e in range(2):
                                    col = min(bn + 32 * wn + 8 * nt + 2 * t + e, n - 1)
                                    sc = scales[col][grp]
                                    accs[wn][nt][lane][e] += parts[nt][lane][e] * sc
                                    accs[wn][nt][lane][2 + e] += parts[nt][lane][2 + e] * sc
                            parts[nt] = [[0.0] * 4 for _ in range(32)]
        for wn in range(4):
            for nt in range(4):
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    for e in range(4):
                        tok, col = g + 8 * (e // 2), bn + 32 * wn + 8 * nt + 2 * t + e % 2
                        if tok < m and col < n:
                            assert (tok, col) not in out
                            out[(tok, col)] = accs[wn][nt][lane][e]
    return out


def check_tc(n, k, m, group, with_zeros, seed):
    vals, scales, zeros, x = random_int4(n, k, m, group, with_zeros, seed)
    got = tc_kernel(x, pack_int4(vals, n, k), scales, zeros, n, k, m, group)
    worst = worst_error(got, x, vals, scales, zeros, n, k, m, group)
    assert worst < 1e-9, f"tc n{n} k{k} m{m} g{group} zeros {with_zeros}: worst error {worst}"
    print(f"ok tensor-core tile n{n} k{k} m{m} group {group} zeros {with_zeros}: worst error {worst:.2e}")


def byte_perm(x, y, sel):
    """__byte_perm: result byte i = byte (sel >> 4i) & 7 of the 8 bytes {x, y} (x = bytes 0..3)."""
    both = x | (y << 32)
    return sum(((both >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def i8_pair(word, j, z):
    """int8_pair_of's f16 path: the biased word's bytes 2j, 2j + 1 under the exponent of 1024 (0x64 bytes), each half
    1024 + u (u = q + 128), less 1152 + z."""
    h = byte_perm(word ^ 0x80808080, 0x64646464, 0x4342 if j else 0x4140)
    halves = [(h >> (16 * i)) & 0xFFFF for i in range(2)]
    assert all(v >> 8 == 0x64 for v in halves)
    return tuple(1024 + (v & 0xFF) - (1152 + z) for v in halves)


def i8_warp_tile(x, q, scales, zeros, n, m, n0, nt, warp, k, group, k_warps, U=4):
    """linear_gemv_mma_kernel<kBits 8>: 32-value regions of 2 k-steps; lane (g, t) takes bytes 8t .. 8t + 7 of rows g,
    g + 8 (k-step s: word s, its bytes 0-1 as a0 / a1 and 2-3 as a2 / a3, less the zero point) and x's same values;
    group scales per region, or (group 0) one scale a row applied to the final sum (returned unscaled here)."""
    acc = [[0.0] * 4 for _ in range(32)]
    for r0 in range(warp, k // 32, k_warps * U):
        for u in range(U):
            r = r0 + u * k_warps
            if r >= k // 32:
                continue
            grp = 32 * r // group if group else 0
            part = [[0.0] * 4 for _ in range(32)]
            for s in range(2):
                A, B0, B1 = [], [], []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    lo, hi = min(n0 + g, n - 1), min(n0 + g + 8, n - 1)
                    o = 32 * r + 8 * t + 4 * s
                    zl = zeros[lo][grp] if zeros else 0
                    zh = zeros[hi][grp] if zeros else 0
                    wlo = sum((q[lo][o + b] & 0xFF) << (8 * b) for b in range(4))  # word s: bytes in k order
                    whi = sum((q[hi][o + b] & 0xFF) << (8 * b) for b in range(4))
                    A.append([i8_pair(wlo, 0, zl), i8_pair(whi, 0, zh), i8_pair(wlo, 1, zl), i8_pair(whi, 1, zh)])
                    xrow = x[min(8 * nt + g, m - 1)]
                    B0.append((xrow[o], xrow[o + 1]))
                    B1.append((xrow[o + 2], xrow[o + 3]))
                part = mma(part, A, B0, B1)
            for lane in range(32):
                g = lane // 4
                sl = scales[min(n0 + g, n - 1)][grp] if group else 1.0
                sh = scales[min(n0 + g + 8, n - 1)][grp] if group else 1.0
                acc[lane] = [acc[lane][0] + part[lane][0] * sl, acc[lane][1] + part[lane][1] * sl,
                             acc[lane][2] + part[lane][2] * sh, acc[lane][3] + part[lane][3] * sh]
    return acc


def check_i8(n, k, m, group, k_warps, with_zeros, seed):
    rnd = random.Random(seed)
    groups = k // group if group else 1
    q = [[rnd.randrange(-128, 128) for _ in range(k)] for _ in range(n)]
    scales = [[rnd.uniform(0.5, 1.5) for _ in range(groups)] for _ in range(n)]
    zeros = [[rnd.randrange(-128, 128) for _ in range(groups)] for _ in range(n)] if with_zeros else None
    x = [[rnd.uniform(-1, 1) for _ in range(k)] for _ in range(m)]
    got = run_blocks(n, m, k_warps, lambda n0, nt, warp: i8_warp_tile(x, q, scales, zeros, n, m, n0, nt, warp, k,
                                                                        group, k_warps))
    worst = 0.0
    for tok in range(m):
        for row in range(n):
            # group 0: the kernel's sums are unscaled until store_output multiplies by the row's scale
            s_row = (lambda j: scales[row][j // group]) if group else (lambda j: 1.0)
            want = sum(x[tok][j] * s_row(j) * (q[row][j] - (zeros[row][j // group] if zeros else 0)) for j in range(k))
            worst = max(worst, abs(got[(tok, row)] - want))
    assert len(got) == n * m and worst < 1e-9, f"i8 n{n} k{k} m{m} g{group} k_warps {k_warps}: worst error {worst}"
    print(f"ok int8 n{n} k{k} m{m} group {group} k_warps {k_warps} zeros {with_zeros}: worst error {worst:.2e}")


def mma_k32(C, A, B0, B1):
    """m16n8k32 (8-bit operands): A[lane] = 4 groups of 4 values (a0..a3), B0 / B1[lane] 4 values (PTX ISA layouts)."""
    Am = [[0.0] * 32 for _ in range(16)]
    Bm = [[0.0] * 8 for _ in range(32)]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            Am[g][4 * t + i], Am[g + 8][4 * t + i] = A[lane][0][i], A[lane][1][i]
            Am[g][16 + 4 * t + i], Am[g + 8][16 + 4 * t + i] = A[lane][2][i], A[lane][3][i]
            Bm[4 * t + i][g], Bm[16 + 4 * t + i][g] = B0[lane][i], B1[lane][i]
    return product(C, Am, Bm)


def fp8_warp_tile(x, w, n, m, k, n0, nt, warp, k_warps):
    """linear_fp8_gemv_mma_kernel's sums of one warp (before the scales): w [n][k], x [m][k] as numbers (the codes'
    values); lane (g, t) takes bytes 32 s + 8t .. + 7 of rows g, g + 8 and of its token's x, the first 4 for a0 / a1 /
    b0 and the next 4 for a2 / a3 / b1; 128-value regions split between warps, each region's 4 k-steps one partial sum
    (the last region may be partial)."""
    acc = [[0.0] * 4 for _ in range(32)]
    for r in range(warp, (k + 127) // 128, k_warps):
        part = [[0.0] * 4 for _ in range(32)]
        for j in range(4):
            k0 = 32 * (4 * r + j)
            if k0 >= k:
                continue
            A, B0, B1 = [], [], []
            for lane in range(32):
                g, t = lane // 4, lane % 4
                lo, hi, xr = w[min(n0 + g, n - 1)], w[min(n0 + g + 8, n - 1)], x[min(8 * nt + g, m - 1)]
                o = k0 + 8 * t
                A.append([lo[o:o + 4], hi[o:o + 4], lo[o + 4:o + 8], hi[o + 4:o + 8]])
                B0.append(xr[o:o + 4])
                B1.append(xr[o + 4:o + 8])
            part = mma_k32(part, A, B0, B1)
        acc = [[acc[lane][e] + part[lane][e] for e in range(4)] for lane in range(32)]
    return acc


def check_fp8(n, k, m, k_warps, seed):
    rnd = random.Random(seed)
    w = [[rnd.uniform(-2, 2) for _ in range(k)] for _ in range(n)]
    x = [[rnd.uniform(-2, 2) for _ in range(k)] for _ in range(m)]
    got = run_blocks(n, m, k_warps, lambda n0, nt, warp: fp8_warp_tile(x, w, n, m, k, n0, nt, warp, k_warps))
    worst = max(abs(got[(t, r)] - sum(a * b for a, b in zip(x[t], w[r]))) for t in range(m) for r in range(n))
    assert len(got) == n * m and worst < 1e-9, f"fp8 n{n} k{k} m{m} k_warps {k_warps}: worst error {worst}"
    print(f"ok fp8 n{n} k{k} m{m} k_warps {k_warps}: worst error {worst:.2e}")


if __name__ == "__main__":
    check(16, 128, 1, 64, 1, False, 1)
    check(48, 256, 3, 128, 2, True, 2, MT=2)  # a partial second block (its second row tile clamped), 2 warps
    check(16, 640, 8, 64, 4, True, 3)      # every token column, regions not a multiple of the warps' batches
    check(80, 384, 5, 128, 1, False, 4, MT=4)  # two blocks of 4 row tiles, the last with one; U batches cover 6 regions
    check(32, 256, 13, 64, 2, True, 5)     # two token tiles, the second partial
    check(16, 128, 16, 128, 1, False, 6)   # two full token tiles
    check(16, 256, 1, 32, 1, False, 7)     # groups of 32: two MMAs a k-step, lanes t < 2 and t >= 2
    check(32, 384, 11, 32, 2, True, 8, MT=2)  # groups of 32 with zero points, two token tiles, 2 warps, 2 row tiles
    check(32, 640, 27, 64, 2, True, 14)    # four token tiles (the last partial), batches of two regions
    check(16, 256, 32, 32, 1, True, 15)    # four full token tiles, groups of 32
    check(32, 448, 14, 64, 3, True, 17, U=2)  # gemv_mma=3: two tiles, batches of two regions, 3 warps
    check(48, 384, 13, 128, 2, True, 19, MT=4)  # one block, its fourth row tile clamped to the third
    check_tc(128, 128, 16, 64, False, 21)  # the tensor-core tile kernel: one block of 128 rows, 2 k tiles
    check_tc(256, 128, 16, 32, True, 22)   # two blocks (the second's row tiles 8..15), groups of 32, zero points
    check_fp8(16, 128, 1, 1, 9)
    check_fp8(23, 544, 12, 2, 10)          # a partial last region (k 544 = 4 x 128 + 32), two token tiles
    check_i8(16, 128, 1, 0, 1, False, 11)     # per-channel scales (applied at the end)
    check_i8(19, 320, 10, 32, 2, True, 12)    # groups of 32 with zero points, two token tiles, 2 warps
    check_i8(33, 256, 5, 128, 1, True, 13)
    check_i8(17, 192, 29, 64, 2, True, 16)    # four token tiles
