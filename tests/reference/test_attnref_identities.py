"""Self-test of tests/reference/attnref.py: the identities of ../shared/spec/attention.md 1.8 and 2.1 (issues 22
and 23) that the reference must satisfy on random data, before anyone trusts it as the known answer.

    /usr/bin/python3 tests/reference/test_attnref_identities.py        (exit status 1 on any failure)

Each check prints one line: "ok" or "FAIL", what was compared, and the largest difference seen.
The worked example (effective rank of the content-free causal averaging matrix at N = 512) is printed too.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnref  # noqa: E402

FAILURES = []
TOL = 1e-12        # identities that hold by construction: relative to the largest entry


def report(ok, what, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + (("  (" + detail + ")") if detail else ""))
    if not ok:
        FAILURES.append(what)


def rel_diff(X, Y):
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.shape != Y.shape:
        return math.inf
    return float(np.max(np.abs(X - Y)) / max(np.max(np.abs(Y)), 1e-300))


def same(X, Y, what, tol=TOL):
    d = rel_diff(X, Y)
    report(d <= tol, what, "max rel diff %.2e" % d)


def data(rng, n, d, offset=0.0):
    return offset + rng.standard_normal((n, d)), offset + rng.standard_normal((n, d))


def numerical_rank(A):
    return attnref.spectrum(A)["rank"]


# Option sets: 1-D and grid (raster and blocked), normalised and not, several feature maps.
N1, D = 48, 5                       # 1-D: N = 48 tokens, d = 5 features
GRID, BGRID = (6, 8), (2, 4)        # grid: 48 tokens on 6 x 8, blocks 3 x 2
LAYOUTS = [("1-D", {}),
           ("grid raster", dict(grid=GRID)),
           ("grid blocked", dict(grid=GRID, block_grid=BGRID, token_order="blocked"))]
NORMS = ("row", "none")
FEATURES = ("relu", "elu1")


def check_errors():
    rng = np.random.default_rng(100)
    Q, K = data(rng, 12, 3)
    bad = [("gated without causal", dict(mechanism="gated", gates=np.full(12, 0.9))),
           ("gates too short", dict(mechanism="gated", causal=True, gates=np.full(11, 0.9))),
           ("gates 2-D", dict(mechanism="gated", causal=True, gates=np.full((12, 1), 0.9))),
           ("gate > 1", dict(mechanism="gated", causal=True, gates=np.r_[np.full(11, 0.9), 1.0 + 1e-12])),
           ("gate = 0", dict(mechanism="gated", causal=True, gates=np.r_[0.0, np.full(11, 0.9)])),
           ("gate < 0", dict(mechanism="gated", causal=True, gates=np.r_[np.full(11, 0.9), -0.5])),
           ("gate NaN", dict(mechanism="gated", causal=True, gates=np.r_[np.full(11, 0.9), np.nan])),
           ("log gate > 0", dict(mechanism="gated", causal=True, gates=np.r_[np.full(11, -0.1), 0.1], gates_log=True)),
           ("log gate -inf", dict(mechanism="gated", causal=True, gates=np.r_[np.full(11, -0.1), -np.inf],
                                  gates_log=True)),
           ("no gates", dict(mechanism="gated", causal=True)),
           ("decay 0", dict(mechanism="decay", decay=0.0)),
           ("decay > 1", dict(mechanism="decay", decay=1.5)),
           ("decay < 0", dict(mechanism="decay", decay=-0.5, causal=True)),
           ("decay on a grid of the wrong size", dict(mechanism="decay", grid=(3, 5))),
           ("cosformer official", dict(mechanism="cosformer", normalize="official"))]
    for what, kw in bad:
        try:
            attnref.attention_matrix(Q=Q, K=K, **kw)
            report(False, "error: " + what, "no ValueError")
        except ValueError as e:
            report(True, "error: " + what, str(e))
    try:
        attnref.allowed_keys("gated", 12, causal=False)
        report(False, "error: allowed_keys of gated without causal", "no ValueError")
    except ValueError:
        report(True, "error: allowed_keys of gated without causal")
    # the boundary values are accepted
    attnref.attention_matrix("gated", Q, K, causal=True, gates=np.r_[np.full(11, 0.5), 1.0])
    attnref.attention_matrix("gated", Q, K, causal=True, gates=np.r_[np.full(11, -0.5), 0.0], gates_log=True)
    attnref.attention_matrix("decay", Q, K, decay=1.0)
    report(True, "gates 1, ln g 0 and decay 1 are accepted")


def check_definitions():
    """Each family entry by entry against a loop over (t, j) (small N)."""
    rng = np.random.default_rng(1)
    n, d = 12, 3
    Q, K = data(rng, n, d)
    pq = attnref.apply_feature_map("relu", Q)
    pk = attnref.apply_feature_map("relu", K)
    g = rng.uniform(0.3, 1.0, n)
    grid = (3, 4)
    pos = [np.unravel_index(t, grid) for t in range(n)]
    for causal in (False, True):
        for gridded in (False, True):
            P = np.zeros((n, n))
            for t in range(n):
                for j in range(n):
                    if causal and j > t:
                        continue
                    if causal:
                        dist = t - j
                    elif gridded:
                        dist = abs(pos[t][0] - pos[j][0]) + abs(pos[t][1] - pos[j][1])
                    else:
                        dist = abs(t - j)
                    P[t, j] = 0.8 ** dist * np.dot(pq[t], pk[j])
            A = attnref.attention_matrix("decay", Q, K, causal=causal, decay=0.8, grid=grid if gridded else None,
                                         normalize="none")
            same(A, P, "decay by loop, causal=%s grid=%s" % (causal, gridded))
    P = np.zeros((n, n))
    for t in range(n):
        for j in range(t + 1):
            P[t, j] = np.prod(g[j + 1:t + 1]) * np.dot(pq[t], pk[j])
    same(attnref.attention_matrix("gated", Q, K, causal=True, gates=g, normalize="none"), P, "gated by loop")
    same(attnref.attention_matrix("gated", Q, K, causal=True, gates=np.log(g), gates_log=True, normalize="none"), P,
         "gated (log gates) by loop", 1e-14)
    for causal in (False, True):
        P = np.zeros((n, n))
        for t in range(n):
            for j in range(n):
                if not causal or j <= t:
                    P[t, j] = np.dot(pq[t], pk[j]) * math.cos(math.pi / 2 * (t - j) / n)
        same(attnref.attention_matrix("cosformer", Q, K, causal=causal, normalize="none"), P,
             "cosformer by loop, causal=%s" % causal)
        same(attnref.attention_matrix("cosformer", Q, K, causal=causal), P / P.sum(axis=1, keepdims=True),
             "cosformer row-normalised, causal=%s" % causal)
    # RetNet's default per head
    for h in (0, 1, 3):
        same(attnref.attention_matrix("decay", Q, K, head=h), attnref.attention_matrix("decay", Q, K,
                                                                                      decay=1 - 2.0 ** (-5 - h)),
             "decay default for head %d is 1 - 2^(-5-%d) = %r" % (h, h, 1 - 2.0 ** (-5 - h)), 0.0)
    # blocked token order: the same tokens as raster order, permuted
    bpos = attnref.grid_positions(N1, GRID, BGRID, "blocked")
    perm = np.ravel_multi_index(tuple(bpos.T), GRID)          # blocked token t is raster token perm[t]
    report(sorted(perm.tolist()) == list(range(N1)), "blocked grid positions are a permutation of the grid")
    blk_blocked, _ = attnref.block_layout(N1, grid=GRID, block_grid=BGRID, token_order="blocked")
    blk_raster, _ = attnref.block_layout(N1, grid=GRID, block_grid=BGRID, token_order="raster")
    report(np.array_equal(blk_blocked, blk_raster[perm]), "blocked positions agree with block_layout's blocks")
    Qr, Kr = data(rng, N1, D)
    Ar = attnref.attention_matrix("decay", Qr, Kr, decay=0.9, grid=GRID)
    Ab = attnref.attention_matrix("decay", Qr[perm], Kr[perm], decay=0.9, grid=GRID, block_grid=BGRID,
                                  token_order="blocked")
    same(Ab, Ar[np.ix_(perm, perm)], "decay on a grid: blocked order = raster order permuted")


def check_family_identities():
    rng = np.random.default_rng(2)
    for fm in FEATURES:
        Q, K = data(rng, N1, D)
        for norm in NORMS:
            for lname, lay in LAYOUTS:
                # gated with constant gates g = decay with g (causal)
                for g in (0.7, 0.97, 1.0):
                    Ad = attnref.attention_matrix("decay", Q, K, causal=True, decay=g, normalize=norm, feature_map=fm,
                                                  **lay)
                    Ag = attnref.attention_matrix("gated", Q, K, causal=True, gates=np.full(N1, g), normalize=norm,
                                                  feature_map=fm)
                    same(Ag, Ad, "gated(const %g) = decay(%g), causal, %s, %s, %s" % (g, g, fm, norm, lname))
                    Agl = attnref.attention_matrix("gated", Q, K, causal=True, gates=np.full(N1, math.log(g)),
                                                   gates_log=True, normalize=norm, feature_map=fm)
                    same(Agl, Ad, "gated(log const) = decay(%g), causal, %s, %s, %s" % (g, fm, norm, lname))
                # decay with g = 1 = linear attention
                for causal in (False, True):
                    Ad = attnref.attention_matrix("decay", Q, K, causal=causal, decay=1.0, normalize=norm,
                                                  feature_map=fm, **lay)
                    Al = attnref.attention_matrix("linear", Q, K, causal=causal, normalize=norm, feature_map=fm)
                    same(Ad, Al, "decay(1) = linear, causal=%s, %s, %s, %s" % (causal, fm, norm, lname))
                # MHLA uniform = linear
                if lname != "1-D":
                    mh = dict(grid=GRID, block_grid=BGRID, token_order=lay.get("token_order", "raster"))
                else:
                    mh = dict(blocks=5)
                for causal in (False, True):
                    Am = attnref.attention_matrix("mhla", Q, K, causal=causal, mixing="uniform", normalize=norm,
                                                  feature_map=fm, **mh)
                    Al = attnref.attention_matrix("linear", Q, K, causal=causal, normalize=norm, feature_map=fm)
                    # causal MHLA on a raster grid allows other keys than j <= t (the block rule): only 1-D and
                    # blocked order (blocks contiguous in token order) give the same mask as linear attention
                    if causal and lname == "grid raster":
                        continue
                    same(Am, Al, "mhla(uniform) = linear, causal=%s, %s, %s, %s" % (causal, fm, norm, lname))
    # cosformer: rank <= 2r (non-causal), and its cos/sin factorisation equals the dense definition
    for fm, extra, r in (("relu", {}, 4), ("elu1", {}, 6), ("favor", dict(favor_features=7, seed=3), 7)):
        Q, K = data(rng, 80, 4 if fm == "relu" else 6)
        if fm == "favor":
            Q, K = data(rng, 80, 5)
        for norm in NORMS:
            A = attnref.attention_matrix("cosformer", Q, K, feature_map=fm, normalize=norm, **extra)
            rk = numerical_rank(A)
            report(rk <= 2 * r, "cosformer rank <= 2r, non-causal, %s, %s" % (fm, norm),
                   "rank %d, 2r = %d, N = 80" % (rk, 2 * r))
            pq = attnref.apply_feature_map(fm, Q, extra.get("favor_features", 256), extra.get("seed", 0))
            pk = attnref.apply_feature_map(fm, K, extra.get("favor_features", 256), extra.get("seed", 0))
            L, R = attnref.cosformer_factors(pq, pk)
            for causal in (False, True):
                P = L @ R.T
                if causal:
                    P = np.tril(P)
                F = P / P.sum(axis=1, keepdims=True) if norm == "row" else P
                Ad = attnref.attention_matrix("cosformer", Q, K, feature_map=fm, normalize=norm, causal=causal,
                                              **extra)
                same(F, Ad, "cosformer cos/sin factors = dense, causal=%s, %s, %s" % (causal, fm, norm))


def check_baselines():
    rng = np.random.default_rng(3)
    N = 40
    Q, K = data(rng, N, 4)
    # softmax non-causal: the uniform matrix, rank 1, entropy ln N
    A0 = attnref.baseline_matrix("softmax", N)
    same(A0, np.full((N, N), 1.0 / N), "baseline(softmax, non-causal) = uniform 1/N")
    m = attnref.measures("softmax", Q, K)
    b = m["baseline"]
    report(b["rank"] == 1, "baseline(softmax, non-causal) rank 1", "rank %d" % b["rank"])
    report(abs(b["entropy"]["mean"] - math.log(N)) <= 1e-13, "baseline(softmax, non-causal) entropy = ln N",
           "%.17g vs %.17g" % (b["entropy"]["mean"], math.log(N)))
    report(abs(b["entropy"]["normalized_mean"] - 1.0) <= 1e-13, "baseline(softmax, non-causal) normalized entropy 1")
    # causal averaging matrix
    avg = np.tril(np.ones((N, N))) / np.arange(1, N + 1)[:, None]
    same(attnref.baseline_matrix("softmax", N, causal=True), avg, "baseline(softmax, causal) = causal averaging")
    same(attnref.baseline_matrix("linear", N, causal=True), avg, "baseline(linear, causal) = causal averaging")
    same(attnref.baseline_matrix("decay", N, causal=True, decay=1.0), avg, "baseline(decay 1, causal) = averaging")
    same(attnref.baseline_matrix("gated", N, causal=True, gates=np.ones(N)), avg, "baseline(gated 1) = averaging")
    same(attnref.baseline_matrix("mhla", N, causal=True, blocks=8, mixing="causal"), avg,
         "baseline(mhla causal mixing, causal, row) = averaging (1.6: MHLA = causal linear there)")
    same(attnref.baseline_matrix("linear", N, causal=True, normalize="none"), np.tril(np.ones((N, N))),
         "baseline(linear, causal, none) = lower-triangular ones")
    # the baseline is the matrix of the mechanism on content-free data: identity features on q = k = 1 (d = 1)
    one = np.ones((N, 1))
    for mech, kw in (("linear", dict(causal=True)), ("linear", dict(normalize="official")),
                     ("decay", dict(causal=False, decay=0.9)),
                     ("decay", dict(causal=False, decay=0.9, grid=(5, 8))),
                     ("gated", dict(causal=True, gates=rng.uniform(0.5, 1, N))), ("cosformer", dict(causal=False)),
                     ("cosformer", dict(causal=True)), ("mhla", dict(blocks=5, mixing="exp")),
                     ("mhla", dict(blocks=5, mixing="exp", normalize="official")),
                     ("mhla", dict(causal=True, blocks=5)),
                     ("mhla", dict(grid=(5, 8), block_grid=(5, 2), mixing="local"))):
        for norm in (("row", "none") if kw.get("normalize") is None else (kw["normalize"],)):
            kk = dict(kw, normalize=norm)
            A_one = attnref.attention_matrix(mech, one, one, feature_map="identity", **kk)
            same(attnref.baseline_matrix(mech, N, **kk), A_one,
                 "baseline(%s %s) = the mechanism on q = k = 1 with identity features" %
                 (mech, ",".join("%s=%s" % (a, v if not isinstance(v, np.ndarray) else "array")
                                 for a, v in sorted(kk.items()))))
    rk = numerical_rank(avg)
    report(rk == N, "causal averaging matrix has numerical rank N = %d" % N, "rank %d" % rk)


def worked_example():
    print("-- worked example: the content-free causal averaging matrix (rows 1/(t+1)), N = 512")
    N = 512
    A0 = attnref.baseline_matrix("linear", N, causal=True)
    sp = attnref.spectrum(A0)
    sm = attnref.spectral_measures(sp["singular_values"])
    ent, _ = attnref.entropy_stats(A0, attnref.allowed_keys("linear", N, causal=True))
    s = sp["singular_values"]
    print("   rank %d (tol %.3g), effective rank %.6f, stable rank %.6f, s_1 %.6f, s_N %.6g" %
          (sp["rank"], sp["rank_tol"], sp["effective_rank"], sp["stable_rank"], s[0], s[-1]))
    print("   energy_rank_90 %d, energy_rank_99 %d, rank_at_rtol %s" %
          (sm["energy_rank_90"], sm["energy_rank_99"], sm["rank_at_rtol"]))
    print("   entropy mean %.6f nats, normalized_mean %.6f" % (ent["mean"], ent["normalized_mean"]))
    pb = attnref.past_block(A0)
    print("   past_block (h = 256): %s" % pb)
    report(sp["rank"] == N, "worked example: numerical rank 512")
    report(abs(sp["effective_rank"] - 70.5) < 0.05, "worked example: effective rank about 70.5 (issue 23)",
           "%.4f" % sp["effective_rank"])
    report(pb["rank"] == 1, "worked example: the past block of the averaging matrix has rank 1",
           "rank %d" % pb["rank"])
    # content-free chunk-local causal MHLA (identity mixing) for the M values of the LM sweep: for information
    line = []
    for M in (1, 2, 4, 8, 16, 32):
        B = attnref.baseline_matrix("mhla", N, causal=True, blocks=M, mixing="identity")
        line.append("M=%d: %.1f" % (M, attnref.spectrum(B)["effective_rank"]))
    print("   content-free causal MHLA, identity mixing (chunk-local averaging), effective rank: " + ", ".join(line))
    line = []
    for M in (1, 2, 4, 8, 16, 32):
        B = attnref.baseline_matrix("mhla", N, causal=True, blocks=M)
        line.append("M=%d: %.1f" % (M, attnref.spectrum(B)["effective_rank"]))
    print("   content-free causal MHLA, default causal-local mixing, effective rank: " + ", ".join(line))


def check_measures():
    rng = np.random.default_rng(4)
    N, d = 64, 6
    cases = []
    for fm in FEATURES:
        Q, K = data(rng, N, d)
        cases += [("softmax", Q, K, {}), ("softmax", Q, K, dict(causal=True)),
                  ("linear", Q, K, dict(feature_map=fm)), ("linear", Q, K, dict(causal=True, feature_map=fm)),
                  ("mhla", Q, K, dict(blocks=8, mixing="exp", feature_map=fm)),
                  ("mhla", Q, K, dict(blocks=8, causal=True, feature_map=fm)),
                  ("mhla", Q, K, dict(grid=(8, 8), block_grid=(2, 4), mixing="local", feature_map=fm)),
                  ("decay", Q, K, dict(feature_map=fm)), ("decay", Q, K, dict(causal=True, feature_map=fm)),
                  ("decay", Q, K, dict(grid=(8, 8), decay=0.8, feature_map=fm, normalize="none")),
                  ("gated", Q, K, dict(causal=True, gates=rng.uniform(0.6, 1, N), feature_map=fm)),
                  ("cosformer", Q, K, dict(feature_map=fm)), ("cosformer", Q, K, dict(causal=True, feature_map=fm))]
    for mech, Q, K, kw in cases:
        what = "%s %s" % (mech, ",".join("%s=%s" % (a, v if not isinstance(v, np.ndarray) else "array")
                                        for a, v in sorted(kw.items())))
        A = attnref.attention_matrix(mech, Q, K, **kw)
        res = attnref.analyze_result(mech, Q, K, **kw)
        r = res["rank_at_rtol"]
        vals = [r[k] for k, _ in attnref.RTOL_KEYS]
        report(all(a <= b for a, b in zip(vals, vals[1:])), "rank_at_rtol monotone (non-increasing in rtol): " + what,
               str(vals))
        report(list(r.keys()) == ["1e-2", "1e-3", "1e-4", "1e-6", "1e-8", "1e-10", "1e-12"],
               "rank_at_rtol keys: " + what)
        ok = res["energy_rank_90"] <= res["energy_rank_99"] <= res["rank"]
        b = res["baseline"]
        ok = ok and b["energy_rank_90"] <= b["energy_rank_99"] <= b["rank"]
        if "past_block" in res:
            pb = res["past_block"]
            ok = ok and pb["energy_rank_90"] <= pb["energy_rank_99"] <= pb["rank"]
        report(ok, "energy ranks 90 <= 99 <= rank (A, baseline, past block): " + what,
               "%d %d %d" % (res["energy_rank_90"], res["energy_rank_99"], res["rank"]))
        # energy rank by its definition, from the singular values directly
        s = np.linalg.svd(A, compute_uv=False)
        e = s ** 2
        k90 = next(k for k in range(1, len(s) + 1) if e[:k].sum() >= 0.9 * e.sum())
        report(k90 == res["energy_rank_90"], "energy_rank_90 by definition: " + what, "%d" % k90)
        # rank_at_rtol["1e-k"] equals the rank rule with rank_rtol
        same_rtol = all(attnref.spectrum(A, rv)["rank"] == r[key] for key, rv in attnref.RTOL_KEYS)
        report(same_rtol, "rank_at_rtol = spectrum(rank_rtol) for each rtol: " + what)
        # the measure keys of cli.md
        want = {"energy_rank_90", "energy_rank_99", "rank_at_rtol", "baseline", "excess_effective_rank",
                "entropy_below_baseline"}
        keys_ok = want <= set(res) and "support_normalized_mean" in res["entropy"]
        keys_ok = keys_ok and set(b) == {"rank", "effective_rank", "stable_rank", "energy_rank_90", "energy_rank_99",
                                         "entropy"}
        keys_ok = keys_ok and set(b["entropy"]) == {"mean", "normalized_mean"}
        keys_ok = keys_ok and (("past_block" in res) == bool(kw.get("causal")))
        report(keys_ok, "result keys as cli.md names them: " + what)
        same(res["excess_effective_rank"], res["effective_rank"] - b["effective_rank"],
             "excess_effective_rank: " + what, 0.0)
        same(res["entropy_below_baseline"], b["entropy"]["mean"] - res["entropy"]["mean"],
             "entropy_below_baseline: " + what, 1e-15)
        # support-normalised = normalised entropy when the support is the causal rule (every allowed key)
        sizes = attnref.support_sizes(mech, N, **kw)
        allowed = attnref.allowed_keys(mech, N, **kw)
        if np.array_equal(sizes, allowed):
            same(res["entropy"]["support_normalized_mean"], res["entropy"]["normalized_mean"],
                 "support_normalized_mean = normalized_mean (support = allowed keys): " + what, 0.0)
        else:
            mask = attnref.support_mask(mech, N, **kw)
            outside = float(np.max(np.abs(np.where(mask, 0.0, A))))
            report(outside == 0.0 and np.all(sizes <= allowed),
                   "A is 0 outside the support, |S_t| <= n_t (support smaller than the mask): " + what,
                   "|S_t| %d..%d vs n_t %d..%d" % (sizes.min(), sizes.max(), allowed.min(), allowed.max()))
    # every key allowed, by construction: non-causal softmax / linear / decay / cosformer
    Q, K = data(rng, N, d)
    for mech in ("softmax", "linear", "decay", "cosformer"):
        sizes = attnref.support_sizes(mech, N)
        report(np.all(sizes == N), "support of non-causal %s is every key" % mech)
    # the support of MHLA with zeros in Mc, counted by hand
    Mc = np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0], [-0.3, 0.0, 1.0]])       # signed, zero-containing
    n3 = 30
    blk = np.repeat(np.arange(3), 10)
    want = np.array([sum(1 for j in range(n3) if Mc[blk[t], blk[j]] != 0) for t in range(n3)])
    got = attnref.support_sizes("mhla", n3, blocks=3, mixing_matrix=Mc)
    report(np.array_equal(got, want), "support of MHLA with a zero-containing Mc (non-causal)", str(sorted(set(got))))
    want_c = np.array([sum(1 for j in range(n3) if Mc[blk[t], blk[j]] != 0 and j <= t) for t in range(n3)])
    got_c = attnref.support_sizes("mhla", n3, blocks=3, mixing_matrix=Mc, causal=True)
    report(np.array_equal(got_c, want_c), "support of MHLA with a zero-containing Mc (causal)")
    Qs, Ks = data(rng, n3, 3)
    res = attnref.analyze_result("mhla", Qs, Ks, blocks=3, mixing_matrix=Mc)
    report(res["entropy"] is None and res["baseline"]["entropy"] is None and res["entropy_below_baseline"] is None,
           "signed Mc: entropy, baseline entropy and entropy_below_baseline are null", "; ".join(res["warnings"]))


def check_past_block():
    rng = np.random.default_rng(5)
    N = 60
    for fm, r, extra in (("relu", 4, {}), ("elu1", 5, {}), ("favor", 6, dict(favor_features=6, seed=9))):
        Q, K = data(rng, N, 4 if fm == "relu" else 5)
        for norm in NORMS:
            for mech, kw, bound, label in (("linear", {}, r, "r"), ("linear", dict(causal=True), r, "r"),
                                           ("decay", dict(causal=True, decay=0.93), r, "r"),
                                           ("gated", dict(causal=True, gates=rng.uniform(0.8, 1, N)), r, "r"),
                                           ("cosformer", dict(causal=True), 2 * r, "2r")):
                for h in (None, 17, 45):
                    A = attnref.attention_matrix(mech, Q, K, feature_map=fm, normalize=norm, **kw, **extra)
                    pb = attnref.past_block(A, h)
                    hh = N // 2 if h is None else h
                    ok = pb["rank"] <= min(bound, pb["rows"], pb["cols"]) and pb["rows"] == N - hh and pb["cols"] == hh
                    report(ok, "past_block rank <= %s: %s %s %s %s h=%s" % (label, mech, kw.get("causal", False), fm,
                                                                            norm, h),
                           "rank %d, bound %d, %dx%d" % (pb["rank"], bound, pb["rows"], pb["cols"]))
    A = np.arange(1.0, 37.0).reshape(6, 6)
    pb = attnref.past_block(A)
    s = np.linalg.svd(A[3:, :3], compute_uv=False)
    same(pb["effective_rank"], attnref.spectrum(A[3:6, 0:3])["effective_rank"], "past_block = the block A[3:, :3]", 0.0)
    report(pb["rank"] == int(np.sum(s > s[0] * 3 * 2.0 ** -52)),
           "past_block rank rule tol = s1 * max(rows, cols) * 2^-52")
    for bad in (0, 6, -1):
        try:
            attnref.past_block(A, bad)
            report(False, "past_block h = %d is an error" % bad)
        except ValueError:
            report(True, "past_block h = %d is an error" % bad)


def check_aggregate():
    # sign test against hand-computed binomial tails
    known = [((9, 1, 0), 0.021484375), ((10, 0, 0), 2.0 / 1024), ((1, 0, 0), 1.0), ((0, 0, 3), 1.0),
             ((4, 1, 0), 2 * 6 / 32.0), ((5, 5, 0), 1.0), ((2, 8, 2), 2 * (1 + 10 + 45) / 1024.0),
             ((0, 20, 0), 2.0 / 2 ** 20), ((3, 3, 4), 1.0), ((6, 1, 3), 2 * 8 / 128.0)]
    for (pos, neg, ties), p in known:
        d = [1.0] * pos + [-2.0] * neg + [0.0] * ties
        got = attnref.sign_test_p(d)
        report(got == p, "sign test p, %d positive %d negative %d ties" % (pos, neg, ties), "%r vs %r" % (got, p))
    # percentile_linear is numpy.percentile's default method
    rng = np.random.default_rng(6)
    means = attnref.bootstrap_means(rng.standard_normal(9))
    ok = all(attnref.percentile_linear(means, p) == float(np.percentile(means, p))
             for p in (2.5, 97.5, 0, 50, 100, 12.3))
    report(ok, "percentile_linear = numpy.percentile (linear), bit for bit")
    # the generator stream: the first draws of SplitMix64(0) (published splitmix64 test values)
    g = attnref.SplitMix64(0)
    first = [g.next_u64() for _ in range(3)]
    report(first == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F], "SplitMix64(0) first outputs",
           ", ".join("%016x" % x for x in first))
    # the bootstrap by hand for a tiny case: indices floor(u * n) from SplitMix64(0)
    x = [1.0, 2.0, 4.0]
    g = attnref.SplitMix64(0)
    hand = []
    for _ in range(2000):
        tot = 0.0
        for _ in range(3):
            tot += x[int(g.uniform() * 3)]
        hand.append(tot / 3)
    same(attnref.bootstrap_means(x), np.array(hand), "bootstrap means = the documented procedure", 0.0)
    # interval contains the mean, for well-behaved data; paired rows
    units = []
    for u in range(30):
        z = rng.standard_normal()
        units.append({"unit": "u%d" % u, "mechanism": "softmax", "rank": 40 + z, "entropy.mean": 2.0 + 0.1 * z})
        units.append({"unit": "u%d" % u, "mechanism": "linear", "rank": 30 + z + 0.5 * rng.standard_normal(),
                      "entropy.mean": None if u == 7 else 2.5 + 0.1 * rng.standard_normal()})
        units.append({"unit": "u%d" % u, "mechanism": "mhla", "rank": 35 + rng.standard_normal(),
                      "entropy.mean": 2.2 + 0.1 * rng.standard_normal()})
    agg = attnref.aggregate(units)
    for row in agg["mechanisms"]:
        x = [v[row["metric"]] for v in units if v["mechanism"] == row["mechanism"] and v[row["metric"]] is not None]
        ok = row["ci_low"] <= row["mean"] <= row["ci_high"] and row["n"] == len(x)
        ok = ok and abs(row["mean"] - np.mean(x)) <= 1e-13 * abs(np.mean(x))
        ok = ok and abs(row["std"] - np.std(x, ddof=1)) <= 1e-12 * np.std(x, ddof=1)
        report(ok, "aggregate %s %s: n, mean, sample std; ci contains the mean" % (row["mechanism"], row["metric"]),
               "n %d mean %.4f std %.4f [%.4f, %.4f]" % (row["n"], row["mean"], row["std"], row["ci_low"],
                                                           row["ci_high"]))
    for row in agg["pairs"]:
        ok = row["ci_low"] <= row["mean_diff"] <= row["ci_high"] and 0 < row["p_sign"] <= 1
        report(ok, "aggregate pair %s - %s %s: ci contains the mean difference" %
               (row["mechanism_a"], row["mechanism_b"], row["metric"]),
               "n %d diff %.4f [%.4f, %.4f] p %.3g" % (row["n"], row["mean_diff"], row["ci_low"], row["ci_high"],
                                                     row["p_sign"]))
    pair = next(r for r in agg["pairs"] if r["mechanism_a"] == "softmax" and r["mechanism_b"] == "linear"
                and r["metric"] == "rank")
    report(pair["n"] == 30 and pair["p_sign"] == 2.0 / 2 ** 30 and pair["ci_low"] > 9,
           "softmax - linear rank: every unit +10: n 30, p = 2^-29, interval near 10")
    pair = next(r for r in agg["pairs"] if r["mechanism_a"] == "softmax" and r["mechanism_b"] == "linear"
                and r["metric"] == "entropy.mean")
    report(pair["n"] == 29, "paired rows drop a unit where either value is null", "n %d" % pair["n"])
    # a result flattened for aggregation
    Q, K = data(rng, 20, 3)
    flat = attnref.flatten_result(attnref.analyze_result("linear", Q, K, causal=True))
    report("rank_at_rtol.1e-3" in flat and "past_block.rank" in flat and "baseline.entropy.mean" in flat
           and "entropy.support_normalized_mean" in flat and "singular_values" not in flat,
           "flatten_result names nested metrics with dots")


def main():
    check_errors()
    check_definitions()
    check_family_identities()
    check_baselines()
    check_measures()
    check_past_block()
    check_aggregate()
    worked_example()
    print()
    if FAILURES:
        print("%d check(s) failed:" % len(FAILURES))
        for f in FAILURES:
            print("  " + f)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
