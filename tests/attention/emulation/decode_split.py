# Pure-Python emulation of src/ops/attention/decode.cuh (decode_kernel + decode_merge_kernel), thread by thread in
# float64: row groups (query heads x tokens of one KV head), split key ranges, contiguous and paged caches through the
# block table, the causal bottom-right mask, the online softmax per warp row and the lse merge, against naive
# attention per (sequence, head, token). Checks the index math only; the test command runs it
# (tests/attention/test_attention_emulation.py), by hand (~1 s):
#     python3 tests/attention/emulation/decode_split.py
import math, random

THREADS, R, TILE_ELEMS, PAGE = 128, 16, 4096, 16

def decode(q, kc, vc, lens, table, B, S_Q, H, HK, D, cap, causal, scale, splits, chunk):
    # q[b][i][h][d]; kc/vc: contiguous [b][pos][hk][d] or paged [page][slot][hk][d] (table given).
    G = H // HK; rows_total = G * S_Q; BN = TILE_ELEMS // D; groups = (rows_total + R - 1) // R
    log2e = 1.4426950408889634
    part = {}  # (split, b, i, h) -> (o, lse)
    for split in range(splits):
        for by in range(B * HK):
            b, kvh = by // HK, by % HK
            for z in range(groups):
                r0 = z * R
                length = min(max(lens[b], 0), cap)
                kbeg, kend = split * chunk, min(length, split * chunk + chunk)
                tok = lambda r: (r0 + r) // G
                head = lambda r: kvh * G + (r0 + r) % G
                def key_row(cache, key):
                    if table is None: return cache[b][key][kvh]
                    return cache[table[b][key // PAGE]][key % PAGE][kvh]
                m_run = [-math.inf] * R; l_run = [0.0] * R
                acc = [[0.0] * D for _ in range(R)]
                n_tiles = (kend - kbeg + BN - 1) // BN if kend > kbeg else 0
                for it in range(n_tiles):
                    key0 = kbeg + it * BN
                    S = [[0.0] * BN for _ in range(R)]
                    for pair in range(R * BN):  # threads tid + pi * THREADS cover every (row, key) pair once
                        r, j = pair // BN, pair % BN
                        key = key0 + j
                        kr = key_row(kc, key) if key < kend else [0.0] * D
                        qr = q[b][tok(r)][head(r)] if r0 + r < rows_total else [0.0] * D
                        dot = sum(a * c for a, c in zip(qr, kr))
                        masked = key >= kend or r0 + r >= rows_total or (causal and key > length - S_Q + tok(r))
                        S[r][j] = -math.inf if masked else dot * scale * log2e
                    corr = [0.0] * R
                    for r in range(R):
                        mx = max([m_run[r]] + S[r])
                        mu = 0.0 if mx == -math.inf else mx
                        c = 0.0 if m_run[r] == -math.inf else 2.0 ** (m_run[r] - mu)
                        ps = [0.0 if x == -math.inf else 2.0 ** (x - mu) for x in S[r]]
                        S[r] = ps
                        m_run[r] = mx; l_run[r] = l_run[r] * c + sum(ps); corr[r] = c
                    for r in range(R):
                        for d in range(D):
                            acc[r][d] *= corr[r]
                            for j in range(BN):
                                key = key0 + j
                                vr = key_row(vc, key) if key < kend else [0.0] * D
                                acc[r][d] += S[r][j] * vr[d]
                for r in range(R):
                    if r0 + r >= rows_total: continue
                    l = l_run[r]
                    o = [a / l if l > 0 else 0.0 for a in acc[r]]
                    lse = m_run[r] * math.log(2) + math.log(l) if l > 0 else -math.inf
                    part[(split, b, tok(r), head(r))] = (o, lse)
    out = {}
    for b in range(B):
        for i in range(S_Q):
            for h in range(H):
                ls = [part[(s, b, i, h)][1] for s in range(splits)]
                m = max(ls)
                if m == -math.inf: out[(b, i, h)] = ([0.0] * D, -math.inf); continue
                lse = m + math.log(sum(math.exp(x - m) for x in ls))
                o = [sum(math.exp(ls[s] - lse) * part[(s, b, i, h)][0][d] for s in range(splits) if ls[s] != -math.inf)
                     for d in range(D)]
                out[(b, i, h)] = (o, lse)
    return out

def naive(q, kc, vc, lens, table, B, S_Q, H, HK, D, causal, scale):
    out = {}
    for b in range(B):
        keys = [(kc[b][j] if table is None else kc[table[b][j // PAGE]][j % PAGE]) for j in range(lens[b])]
        vals = [(vc[b][j] if table is None else vc[table[b][j // PAGE]][j % PAGE]) for j in range(lens[b])]
        for i in range(S_Q):
            for h in range(H):
                hk = h // (H // HK)
                lim = i + lens[b] - S_Q if causal else lens[b] - 1
                xs = [scale * sum(a * c for a, c in zip(q[b][i][h], keys[j][hk])) for j in range(lens[b]) if j <= lim]
                if not xs: out[(b, i, h)] = ([0.0] * D, -math.inf); continue
                m = max(xs); ps = [math.exp(x - m) for x in xs]; l = sum(ps)
                out[(b, i, h)] = ([sum(ps[j] * vals[j][hk][d] for j in range(len(ps))) / l for d in range(D)],
                                  m + math.log(l))
    return out

random.seed(3)
rnd = lambda *shape: ([rnd(*shape[1:]) for _ in range(shape[0])] if len(shape) > 1 else
                      [random.uniform(-1, 1) for _ in range(shape[0])])
worst = 0.0
D = 64
for (B, S_Q, H, HK, lens, causal, paged, splits) in [
        (2, 1, 4, 1, [150, 37], False, False, 3),   # GQA 4, 3 splits of 64 keys (the last one empty for b = 1)
        (2, 3, 8, 1, [70, 2], True, True, 2),       # 24 rows per KV head: 2 row groups; causal with len < s_q
        (1, 2, 2, 2, [0], False, True, 1),          # an empty sequence
        (3, 1, 32, 1, [90, 130, 5], False, True, 2)]:  # MQA: 32 rows, 2 groups
    cap = (max(lens) + PAGE - 1) // PAGE * PAGE + PAGE
    mp = cap // PAGE
    q = rnd(B, S_Q, H, D)
    if paged:
        pages = list(range(B * mp)); random.shuffle(pages)
        table = [pages[b * mp:(b + 1) * mp] for b in range(B)]
        kc, vc = rnd(B * mp, PAGE, HK, D), rnd(B * mp, PAGE, HK, D)
    else:
        table = None
        kc, vc = rnd(B, cap, HK, D), rnd(B, cap, HK, D)
    BN = TILE_ELEMS // D
    tiles = max(1, (cap + BN - 1) // BN)
    chunk_tiles = (tiles + splits - 1) // splits
    chunk = chunk_tiles * BN
    splits = (tiles + chunk_tiles - 1) // chunk_tiles
    scale = 1 / math.sqrt(D)
    got = decode(q, kc, vc, lens, table, B, S_Q, H, HK, D, cap, causal, scale, splits, chunk)
    want = naive(q, kc, vc, lens, table, B, S_Q, H, HK, D, causal, scale)
    for key, (wo, wl) in want.items():
        go, gl = got[key]
        if wl == -math.inf: assert gl == -math.inf and all(x == 0 for x in go), key
        else: worst = max(worst, abs(gl - wl), max(abs(a - c) for a, c in zip(go, wo)))
    print(B, S_Q, H, HK, lens, causal, paged, splits, "worst |error| so far", worst)
assert worst < 1e-12, worst
