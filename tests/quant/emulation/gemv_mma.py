# Pure-Python emulation of src/ops/quant/linear.cuh's tensor-core GEMVs, linear_gemv_mma_kernel (KERNELKIT_TUNE
# gemv_mma=1 / 2; INT4 and, i8_warp_tile, INT8 weights) and linear_fp8_gemv_mma_kernel (fp8_gemv=2, m16n8k32 over byte codes: fp8_kernel below), lane by
# lane, in float64: the INT4 kernel layout as quantize_int4_groupwise / pack_int4 write it, each lane's 8-byte share
# of a 32-byte region of rows g and g + 8, the A pairs of int4_pair_of (raw nibbles j and j + 4 of word >> 4j, biased
# by 8) less the zero points, the B pairs of x, mma.sync m16n8k16 as the PTX ISA defines its fragments (written from
# the ISA, not from the kernel), the region's group scales, the warps' k split and the block's sums. A wrong fragment
# index, word, pair or region shows up as a large error against the naive product. The test command runs it
# (tests/quant/test_quant_emulation.py); by hand (~1 s):
#     python3 tests/quant/emulation/gemv_mma.py
import random

NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]  # value j of a word sits in nibble NIBBLE[j] (include/kernelkit/ops/quant.hpp)


def pack_row(values):
    """signed INT4 values of one row (len % 8 == 0) -> bytes of the kernel layout."""
    out = []
    for w0 in range(0, len(values), 8):
        word = 0
        for j in range(8):
            word |= (values[w0 + j] & 0xF) << (4 * NIBBLE[j])
        out += [(word >> (8 * b)) & 0xFF for b in range(4)]
    return out


def pack_fragments(q_bytes, n, k):
    """The fragment-ordered INT4 layout (linear.cuh kTiled; n a multiple of 16): [n / 16][k / 64][lane (g, t)][16
    bytes], a lane's 16 bytes row g's bytes 8t .. 8t + 7 of the region, then row g + 8's."""
    return [[[q_bytes[16 * tile + g + 8 * h][32 * r + 8 * t + b] for g in range(8) for t in range(4) for h in range(2)
              for b in range(8)] for r in range(k // 64)] for tile in range(n // 16)]


def word_at(row_bytes, off):
    return sum(row_bytes[off + b] << (8 * b) for b in range(4))


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


def warp_tile(x, q_bytes, scales, zeros, n, m, n0, nt, warp, regions, shift, k_warps, U, g32, tiles=None):
    """One warp's C fragments (acc[lane] = c0..c3) for token tile nt of the block at row n0: its regions' MMAs.
    g32 (groups of 32): lane t takes word t of each 16-byte chunk, k-steps 0-1 the first chunk, 2-3 the second, each
    chunk's sums scaled by its own group; else 8 contiguous bytes, one group a region. tiles: the weights read from
    the fragment-ordered layout instead (pack_fragments: the lane's 16 bytes at 16 lane, row g's word wi at 4 wi, row
    g + 8's at 8 + 4 wi)."""
    acc = [[0.0] * 4 for _ in range(32)]
    for r0 in range(warp, regions, k_warps * U):
        for u in range(U):
            r = r0 + u * k_warps
            if r >= regions:
                continue
            part = [[0.0] * 4 for _ in range(32)]
            for s in range(4):
                grp = 2 * r + s // 2 if g32 else r >> shift
                A, B0, B1 = [], [], []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    lo, hi = min(n0 + g, n - 1), min(n0 + g + 8, n - 1)
                    wi = s // 2  # word .x (0) or .y (1) of the lane's 8 bytes at 32 r + 8 t
                    off = 32 * r + (4 * t + 16 * wi if g32 else 8 * t + 4 * wi)
                    if tiles is None:
                        wlo, whi = word_at(q_bytes[lo], off), word_at(q_bytes[hi], off)
                    else:
                        frag = tiles[n0 // 16][r]
                        wlo, whi = word_at(frag, 16 * lane + 4 * wi), word_at(frag, 16 * lane + 8 + 4 * wi)
                    j = 2 * (s % 2)
                    zl = zeros[lo][grp] if zeros else 0
                    zh = zeros[hi][grp] if zeros else 0
                    A.append([pair_of(wlo, j, zl), pair_of(whi, j, zh), pair_of(wlo, j + 1, zl),
                              pair_of(whi, j + 1, zh)])
                    xrow = x[min(8 * nt + g, m - 1)]
                    # xs[2 s], xs[2 s + 1]: x 4s .. 4s + 3 of the lane's 16 (two runs of 8 apart with g32)
                    base = 64 * r + (8 * t + 32 * (s // 2) + 4 * (s % 2) if g32 else 16 * t + 4 * s)
                    B0.append((xrow[base], xrow[base + 1]))
                    B1.append((xrow[base + 2], xrow[base + 3]))
                part = mma(part, A, B0, B1)
                if s == 3 or (g32 and s == 1):  # the group's last k-step
                    for lane in range(32):
                        g = lane // 4
                        sl, sh = scales[min(n0 + g, n - 1)][grp], scales[min(n0 + g + 8, n - 1)][grp]
                        acc[lane] = [acc[lane][0] + part[lane][0] * sl, acc[lane][1] + part[lane][1] * sl,
                                     acc[lane][2] + part[lane][2] * sh, acc[lane][3] + part[lane][3] * sh]
                    part = [[0.0] * 4 for _ in range(32)]
    return acc


def run_blocks(n, m, k_warps, tile):
    """The block loop both kernels share: tile(n0, nt, warp) gives one warp's C fragments (acc[lane] = c0..c3) of
    token tile nt of the block at row n0; they go to the block's partials [warp][16 rows][tokens] (element e of lane
    (g, t): row g + 8 (e // 2), token 8 nt + 2t + e % 2) and each output is their sum over the warps."""
    NT = 1 if m <= 8 else 2 if m <= 16 else 4  # gemv_mma=2: four tiles for m 17-32
    tokens = 8 * NT
    out = {}
    for n0 in range(0, n, 16):
        partials = [[0.0] * (16 * tokens) for _ in range(k_warps)]
        for warp in range(k_warps):
            for nt in range(NT):
                acc = tile(n0, nt, warp)
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    for e in range(4):
                        partials[warp][(g + 8 * (e // 2)) * tokens + 8 * nt + 2 * t + e % 2] = acc[lane][e]
        for i in range(16 * tokens):
            r, tok = i // tokens, i % tokens
            if n0 + r < n and tok < m:
                out[(tok, n0 + r)] = sum(partials[w][i] for w in range(k_warps))
    return out


def kernel(x, q_bytes, scales, zeros, n, k, m, group, k_warps, U=None, tiled=False):
    """out[(token, row)] as linear_gemv_mma_kernel computes it (fp64); U: regions a batch (mma_gemv_unroll); tiled:
    over the fragment-ordered layout."""
    regions, shift = k // 64, group.bit_length() - 1 - 6
    U = U or (4 if m <= 16 else 2)
    tiles = pack_fragments(q_bytes, n, k) if tiled else None
    return run_blocks(n, m, k_warps, lambda n0, nt, warp: warp_tile(
        x, q_bytes, scales, zeros, n, m, n0, nt, warp, regions, shift, k_warps, U, group == 32, tiles))


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


def check(n, k, m, group, k_warps, with_zeros, seed, U=None, tiled=False):
    rnd = random.Random(seed)
    groups = k // group
    vals = [[rnd.randrange(-8, 8) for _ in range(k)] for _ in range(n)]
    q_bytes = [pack_row(v) for v in vals]
    scales = [[rnd.uniform(0.5, 1.5) for _ in range(groups)] for _ in range(n)]
    zeros = [[rnd.randrange(-128, 128) if rnd.random() < 0.25 else rnd.randrange(-8, 9) for _ in range(groups)]
             for _ in range(n)] if with_zeros else None
    x = [[rnd.uniform(-1, 1) for _ in range(k)] for _ in range(m)]
    got = kernel(x, q_bytes, scales, zeros, n, k, m, group, k_warps, U, tiled)
    worst = 0.0
    for tok in range(m):
        for row in range(n):
            want = sum(x[tok][j] * scales[row][j // group] * (vals[row][j] - (zeros[row][j // group] if zeros else 0))
                       for j in range(k))
            worst = max(worst, abs(got[(tok, row)] - want))
    assert len(got) == n * m, (len(got), n * m)
    assert worst < 1e-9, f"n{n} k{k} m{m} g{group} k_warps {k_warps} zeros {with_zeros}: worst error {worst}"
    print(f"ok n{n} k{k} m{m} group {group} k_warps {k_warps} zeros {with_zeros}{' tiled' if tiled else ''}: "
          f"worst error {worst:.2e}")


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
    check(19, 256, 3, 128, 2, True, 2)     # a partial second block of rows, 2 warps
    check(8, 640, 8, 64, 4, True, 3)       # every token column, regions not a multiple of the warps' batches
    check(33, 384, 5, 128, 1, False, 4)    # 3 row blocks, the last with one row; U batches cover 6 regions
    check(17, 256, 13, 64, 2, True, 5)     # two token tiles, the second partial
    check(16, 128, 16, 128, 1, False, 6)   # two full token tiles
    check(16, 256, 1, 32, 1, False, 7)     # groups of 32: word t of each chunk
    check(21, 384, 11, 32, 2, True, 8)     # groups of 32 with zero points, two token tiles, 2 warps
    check(18, 640, 27, 64, 2, True, 14)    # four token tiles (the last partial), batches of two regions
    check(16, 256, 32, 32, 1, True, 15)    # four full token tiles, groups of 32
    check(20, 448, 14, 64, 3, True, 17, U=2)  # gemv_mma=3: two tiles, batches of two regions, 3 warps
    check(32, 256, 1, 64, 1, False, 18, tiled=True)    # fragment-ordered weights: two row blocks
    check(48, 384, 13, 128, 2, True, 19, tiled=True)   # two token tiles, zero points, 2 warps
    check(16, 640, 27, 64, 2, True, 20, tiled=True)    # four token tiles, batches of two regions
    check_fp8(16, 128, 1, 1, 9)
    check_fp8(23, 544, 12, 2, 10)          # a partial last region (k 544 = 4 x 128 + 32), two token tiles
    check_i8(16, 128, 1, 0, 1, False, 11)     # per-channel scales (applied at the end)
    check_i8(19, 320, 10, 32, 2, True, 12)    # groups of 32 with zero points, two token tiles, 2 warps
    check_i8(33, 256, 5, 128, 1, True, 13)
    check_i8(17, 192, 29, 64, 2, True, 16)    # four token tiles
