# Pure-Python emulation of src/ops/attention/flash_prefill.cuh for one block at a time: its shared-memory swizzle,
# ldmatrix addresses (Q, K, and V with .trans), mma.sync m16n8k16 fragments, causal / sequence-end masking, online
# softmax, quad reductions and the staged epilogue, lane by lane, in float64. ldmatrix and mma follow the PTX ISA's
# definitions (written from the ISA, not from the kernel), so a wrong fragment index or swizzle shows up as a large
# error against naive attention. The test command runs it with the defaults
# (tests/attention/test_attention_emulation.py); by hand (~1 s):
#     python3 tests/attention/emulation/flash_prefill_fragments.py [D BM BN]     (default 64 32 32; e.g. 128 16 64)
# It checks index math only: fp16/bf16 rounding, cp.async ordering and races are for the GPU tests and racecheck.
import math, random

def swz(D, row, col): return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7)

def ldmatrix_x4(smem, addr_of_lane, trans):
    # addr_of_lane[l] = element index of row (l % 8) of matrix (l // 8); each row has 8 consecutive elements.
    regs = [[None]*4 for _ in range(32)]
    for i in range(4):
        M = [[smem[addr_of_lane[8*i + r] + c] for c in range(8)] for r in range(8)]
        for l in range(32):
            g, t = l // 4, l % 4
            if not trans: regs[l][i] = (M[g][2*t], M[g][2*t+1])
            else: regs[l][i] = (M[2*t][g], M[2*t+1][g])
    return regs

def mma(C, A, B0, B1):
    # C[l] = [c0..c3], A[l] = 4 pairs, B0[l], B1[l] pairs; returns new C.
    Am = [[0]*16 for _ in range(16)]; Bm = [[0]*8 for _ in range(16)]; Cm = [[0]*8 for _ in range(16)]
    for l in range(32):
        g, t = l // 4, l % 4
        a = A[l]
        Am[g][2*t], Am[g][2*t+1] = a[0]; Am[g+8][2*t], Am[g+8][2*t+1] = a[1]
        Am[g][2*t+8], Am[g][2*t+9] = a[2]; Am[g+8][2*t+8], Am[g+8][2*t+9] = a[3]
        Bm[2*t][g], Bm[2*t+1][g] = B0[l]; Bm[2*t+8][g], Bm[2*t+9][g] = B1[l]
        Cm[g][2*t], Cm[g][2*t+1], Cm[g+8][2*t], Cm[g+8][2*t+1] = C[l]
    Dm = [[Cm[i][j] + sum(Am[i][k]*Bm[k][j] for k in range(16)) for j in range(8)] for i in range(16)]
    return [[Dm[l//4][2*(l%4)], Dm[l//4][2*(l%4)+1], Dm[l//4+8][2*(l%4)], Dm[l//4+8][2*(l%4)+1]] for l in range(32)]

def kernel_block(q, k, v, s_q, s_k, D, BM, BN, m0, causal, scale):
    # q [s_q][D], k, v [s_k][D]; returns {row: (out[D], lse)} for rows m0.. of the block.
    sQ = [0.0]*(BM*D); sK = [0.0]*(BN*D); sV = [0.0]*(BN*D)
    rows = min(BM, s_q - m0); offset = s_k - s_q
    kv_end = min(s_k, m0 + rows + offset) if causal else s_k
    n_tiles = (kv_end + BN - 1)//BN if kv_end > 0 else 0
    def load(s, src, r0, valid, R):
        for c in range(R * (D//8)):
            r, ch = c // (D//8), c % (D//8)
            for e in range(8): s[swz(D, r, ch*8) + e] = src[r0 + r][ch*8 + e] if r < valid else 0.0
    if n_tiles: load(sQ, q, m0, rows, BM)
    log2e = 1.4426950408889634
    res = {}
    warps = BM // 16
    acc = [[[[0.0]*4 for _ in range(32)] for _ in range(D//8)] for _ in range(warps)]
    m_run = [[[-math.inf]*2 for _ in range(32)] for _ in range(warps)]
    l_run = [[[0.0]*2 for _ in range(32)] for _ in range(warps)]
    for it in range(n_tiles):
        load(sK, k, it*BN, min(BN, s_k - it*BN), BN); load(sV, v, it*BN, min(BN, s_k - it*BN), BN)
        n0 = it*BN
        mask = n0 + BN > s_k or (causal and n0 + BN - 1 > m0 + offset)
        for w in range(warps):
            wr = w*16
            s = [[[0.0]*4 for _ in range(32)] for _ in range(BN//8)]
            for kk in range(D//16):
                a = ldmatrix_x4(sQ, [swz(D, wr + (l & 15), kk*16 + (l >> 4)*8) for l in range(32)], False)
                for nb in range(BN//16):
                    bk = ldmatrix_x4(sK, [swz(D, nb*16 + (l & 7) + ((l >> 3) >> 1)*8, kk*16 + ((l >> 3) & 1)*8) for l in range(32)], False)
                    s[2*nb] = mma(s[2*nb], a, [bk[l][0] for l in range(32)], [bk[l][1] for l in range(32)])
                    s[2*nb+1] = mma(s[2*nb+1], a, [bk[l][2] for l in range(32)], [bk[l][3] for l in range(32)])
            # per-lane softmax
            tile_max = [[m_run[w][l][0], m_run[w][l][1]] for l in range(32)]
            for l in range(32):
                g, t = l//4, l % 4
                row_a = m0 + wr + g; row_b = row_a + 8
                for nb in range(BN//8):
                    for e in range(4):
                        x = s[nb][l][e] * scale * log2e
                        if mask:
                            col = n0 + nb*8 + 2*t + (e & 1); row = row_a if e < 2 else row_b
                            if col >= s_k or (causal and col > row + offset): x = -math.inf
                        s[nb][l][e] = x
                        tile_max[l][e//2] = max(tile_max[l][e//2], x)
            # quad reduce
            for r in range(2):
                tm = [tile_max[l][r] for l in range(32)]
                tm = [max(tm[l], tm[l ^ 1]) for l in range(32)]
                tm = [max(tm[l], tm[l ^ 2]) for l in range(32)]
                for l in range(32): tile_max[l][r] = tm[l]
            for l in range(32):
                for r in range(2):
                    mu = 0.0 if tile_max[l][r] == -math.inf else tile_max[l][r]
                    corr = 2.0 ** (m_run[w][l][r] - mu) if m_run[w][l][r] != -math.inf else 0.0
                    m_run[w][l][r] = tile_max[l][r]
                    l_run[w][l][r] *= corr
                    for i in range(D//8):
                        acc[w][i][l][2*r] *= corr; acc[w][i][l][2*r+1] *= corr
                    for nb in range(BN//8):
                        for e in (2*r, 2*r+1):
                            p = 0.0 if s[nb][l][e] == -math.inf else 2.0 ** (s[nb][l][e] - mu)
                            s[nb][l][e] = p; l_run[w][l][r] += p
            for kk in range(BN//16):
                a = [[(s[2*kk][l][0], s[2*kk][l][1]), (s[2*kk][l][2], s[2*kk][l][3]),
                      (s[2*kk+1][l][0], s[2*kk+1][l][1]), (s[2*kk+1][l][2], s[2*kk+1][l][3])] for l in range(32)]
                for db in range(D//16):
                    bv = ldmatrix_x4(sV, [swz(D, kk*16 + (l & 7) + ((l >> 3) & 1)*8, db*16 + ((l >> 3) >> 1)*8) for l in range(32)], True)
                    acc[w][2*db] = mma(acc[w][2*db], a, [bv[l][0] for l in range(32)], [bv[l][1] for l in range(32)])
                    acc[w][2*db+1] = mma(acc[w][2*db+1], a, [bv[l][2] for l in range(32)], [bv[l][3] for l in range(32)])
    # epilogue
    for w in range(warps):
        wr = w*16
        lt = [[l_run[w][l][r] for r in range(2)] for l in range(32)]
        for r in range(2):
            x = [lt[l][r] for l in range(32)]; x = [x[l] + x[l ^ 1] for l in range(32)]; x = [x[l] + x[l ^ 2] for l in range(32)]
            for l in range(32): lt[l][r] = x[l]
        for l in range(32):
            g, t = l//4, l % 4
            for r in range(2):
                inv = 1.0/lt[l][r] if lt[l][r] > 0 else 0.0
                for i in range(D//8):
                    sQ[swz(D, wr + g + 8*r, i*8 + 2*t)] = acc[w][i][l][2*r] * inv
                    sQ[swz(D, wr + g + 8*r, i*8 + 2*t) + 1] = acc[w][i][l][2*r+1] * inv
                row = m0 + wr + g + 8*r
                if t == 0 and row < s_q:
                    lse = m_run[w][l][r]*math.log(2) + math.log(lt[l][r]) if lt[l][r] > 0 else -math.inf
                    res.setdefault(row, [None, None])[1] = lse
        for c in range(16*(D//8)):
            r, ch = wr + c // (D//8), c % (D//8)
            if r < rows:
                out = res.setdefault(m0 + r, [None, None])
                if out[0] is None: out[0] = [None]*D
                for e in range(8): out[0][ch*8 + e] = sQ[swz(D, r, ch*8) + e]
    return res

def naive(q, k, v, s_q, s_k, D, causal, scale):
    out = []
    for i in range(s_q):
        lim = i + s_k - s_q if causal else s_k - 1
        xs = [scale*sum(q[i][d]*k[j][d] for d in range(D)) for j in range(s_k) if j <= lim]
        if not xs: out.append(([0.0]*D, -math.inf)); continue
        m = max(xs); ps = [math.exp(x - m) for x in xs]; l = sum(ps)
        o = [sum(ps[j]*v[j][d] for j in range(len(ps)))/l for d in range(D)]
        out.append((o, m + math.log(l)))
    return out

random.seed(1)
import sys
D, BM, BN = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (64, 32, 32)
worst = 0
for (s_q, s_k, causal) in ([(40, 40, False), (40, 40, True), (20, 45, True), (45, 20, True), (7, 33, False), (33, 7, True)] if D == 64 else [(20, 70, True), (70, 20, True)]):
    q = [[random.uniform(-1, 1) for _ in range(D)] for _ in range(s_q)]
    k = [[random.uniform(-1, 1) for _ in range(D)] for _ in range(s_k)]
    v = [[random.uniform(-1, 1) for _ in range(D)] for _ in range(s_k)]
    scale = 1/math.sqrt(D)
    want = naive(q, k, v, s_q, s_k, D, causal, scale)
    for m0 in range(0, s_q, BM):
        got = kernel_block(q, k, v, s_q, s_k, D, BM, BN, m0, causal, scale)
        for row in range(m0, min(s_q, m0 + BM)):
            if row not in got:
                print("missing row", row); continue
            o, lse = got[row]
            wo, wl = want[row]
            err = max(abs(a - b) for a, b in zip(o, wo))
            if wl == -math.inf: assert lse == -math.inf, (row, lse)
            else: err = max(err, abs(lse - wl))
            worst = max(worst, err)
    print(s_q, s_k, causal, "worst |error| so far", worst)
assert worst < 1e-12, worst
