#include "metrics/semiseparable.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <Eigen/QR>
#include <Eigen/SVD>

#include "kernels/kernels.h"
#include "metrics/metrics.h"
#include "metrics/structured.h"
#include "util/parallel.h"

namespace attnscope::metrics {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

Index block_of(const SplitFactors& f, Index t) { return f.block.empty() ? 0 : f.block[static_cast<std::size_t>(t)]; }

void check_factors(const SplitFactors& f)
{
    const Index n = f.x.rows();
    if (f.y.rows() != n || f.y.cols() != f.x.cols())
        throw std::invalid_argument("past profile: the query side is " + std::to_string(n) + "x" +
                                    std::to_string(f.x.cols()) + " but the key side " + std::to_string(f.y.rows()) +
                                    "x" + std::to_string(f.y.cols()));
    const Index m = f.mixing.rows();
    if (m < 1 || f.mixing.cols() != m)
        throw std::invalid_argument("past profile: the mixing matrix must be square and not empty");
    if (!f.block.empty() && static_cast<Index>(f.block.size()) != n)
        throw std::invalid_argument("past profile: " + std::to_string(f.block.size()) + " block indices for " +
                                    std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < f.block.size(); ++i)
        if (f.block[i] < 0 || f.block[i] >= m)
            throw std::invalid_argument("past profile: token " + std::to_string(i) + " in block " +
                                        std::to_string(f.block[i]) + " of " + std::to_string(m));
    if (f.step.size() != 0 && f.step.size() != n)
        throw std::invalid_argument("past profile: " + std::to_string(f.step.size()) + " step weights for " +
                                    std::to_string(n) + " tokens");
    if (f.step.size() != 0 && m != 1)
        throw std::invalid_argument("past profile: step weights need one block");
    if (!f.x.allFinite() || !f.y.allFinite() || !f.mixing.allFinite() || !f.step.allFinite())
        throw std::invalid_argument("past profile: the factors are not finite");
}

void check_splits(const std::vector<Index>& splits, Index n)
{
    for (std::size_t i = 0; i < splits.size(); ++i) {
        if (splits[i] < 1 || splits[i] > n - 1)
            throw std::invalid_argument("past profile: the split h=" + std::to_string(splits[i]) +
                                        " must lie in 1..N-1 (N=" + std::to_string(n) + ")");
        if (i > 0 && splits[i] <= splits[i - 1])
            throw std::invalid_argument("past profile: the splits must ascend without repeats");
    }
}

// One split by its own thin QRs (structured.h): the weights w(t, h) and w(h, j) folded into the rows.
SplitRank one_split(const SplitFactors& f, Index h, std::optional<double> rtol)
{
    const Index n = f.x.rows();
    BlockFactorization b;
    b.x = f.x.bottomRows(n - h);
    b.y = f.y.topRows(h);
    if (f.step.size() > 0) {
        double w = 1.0;   // w(t, h) for t = h.. : the steps h+1..t
        for (Index t = h; t < n; ++t) {
            if (t > h)
                w *= f.step(t);
            b.x.row(t - h) *= w;
        }
        w = 1.0;          // w(h, j) for j = h-1 .. 0: the steps j+1..h
        for (Index j = h - 1; j >= 0; --j) {
            w *= f.step(j + 1);
            b.y.row(j) *= w;
        }
    }
    b.mixing = f.mixing;
    b.row_block.resize(static_cast<std::size_t>(n - h));
    b.col_block.resize(static_cast<std::size_t>(h));
    for (Index t = h; t < n; ++t)
        b.row_block[static_cast<std::size_t>(t - h)] = block_of(f, t);
    for (Index j = 0; j < h; ++j)
        b.col_block[static_cast<std::size_t>(j)] = block_of(f, j);
    return split_rank(h, n - h, h, block_factor_singular_values(b), rtol);
}

// An upper trapezoidal R (k x r, k <= r) with R^T R = X^T X for the rows X inserted so far: inserting a row
// applies Givens rotations against R's rows (orthogonal, so X^T X stays exact to rounding) and keeps what is
// left of the row when fewer than r rows are held.
void insert_row(MatrixXd& R, Eigen::Ref<const Eigen::RowVectorXd> row)
{
    const Index r = row.size();
    Eigen::RowVectorXd v = row;
    const Index k = R.rows();
    for (Index i = 0; i < k; ++i) {
        const double b = v(i);
        if (b == 0.0)
            continue;
        const double a = R(i, i);
        const double rho = std::hypot(a, b);
        const double c = a / rho, s = b / rho;
        for (Index c2 = i; c2 < r; ++c2) {
            const double ri = R(i, c2), vi = v(c2);
            R(i, c2) = c * ri + s * vi;
            v(c2) = -s * ri + c * vi;
        }
        v(i) = 0.0;
    }
    if (k < r && (v.array() != 0.0).any()) {
        R.conservativeResize(k + 1, r);
        R.row(k) = v;
    }
}

// The carried R factors of the query side: packed per token s, the R of block blk(s)'s rows s.. (each
// weighted by w(t, s)), upper trapezoidal, rows of decreasing length.
struct CarriedQuerySide {
    std::vector<double> values;
    std::vector<std::size_t> offset;   // N + 1
    std::vector<Index> rows;           // N: the R's row count
    Index width = 0;

    MatrixXd at(Index s) const
    {
        const Index k = rows[static_cast<std::size_t>(s)];
        MatrixXd R = MatrixXd::Zero(k, width);
        const double* p = values.data() + offset[static_cast<std::size_t>(s)];
        for (Index i = 0; i < k; ++i)
            for (Index c = i; c < width; ++c)
                R(i, c) = *p++;
        return R;
    }
};

std::size_t packed_size(Index k, Index r) { return static_cast<std::size_t>(k * r - k * (k - 1) / 2); }

CarriedQuerySide carry_query_side(const SplitFactors& f)
{
    const Index n = f.x.rows(), r = f.x.cols(), m = f.mixing.rows();
    CarriedQuerySide out;
    out.width = r;
    out.rows.assign(static_cast<std::size_t>(n), 0);
    std::vector<MatrixXd> current(static_cast<std::size_t>(m), MatrixXd(0, r));
    std::vector<std::vector<double>> per(static_cast<std::size_t>(n));
    for (Index s = n - 1; s >= 0; --s) {
        MatrixXd& R = current[static_cast<std::size_t>(block_of(f, s))];
        if (f.step.size() > 0 && s + 1 < n)
            R *= f.step(s + 1);   // w(t, s) = step[s+1] w(t, s+1)
        insert_row(R, f.x.row(s));
        std::vector<double>& p = per[static_cast<std::size_t>(s)];
        p.reserve(packed_size(R.rows(), r));
        for (Index i = 0; i < R.rows(); ++i)
            for (Index c = i; c < r; ++c)
                p.push_back(R(i, c));
        out.rows[static_cast<std::size_t>(s)] = R.rows();
    }
    out.offset.assign(static_cast<std::size_t>(n) + 1, 0);
    for (Index s = 0; s < n; ++s)
        out.offset[static_cast<std::size_t>(s) + 1] = out.offset[static_cast<std::size_t>(s)] + per[static_cast<std::size_t>(s)].size();
    out.values.reserve(out.offset.back());
    for (auto& p : per) {
        out.values.insert(out.values.end(), p.begin(), p.end());
        std::vector<double>().swap(p);
    }
    return out;
}

// Contiguous blocks (1-D): for every split h in block c the core is
//   [[R_c' W_c, Mc[c,c] R_c' S_c'^T], [Y1, Y2 S_c'^T]],
// with only the query side's R_c' (rows h.. of block c) and the key side's S_c' (rows ..h-1 of block c) changing
// inside the block: W_c = [Mc[c,b] S_b^T]_{b<c}, Y1 = [Mc[a,b] R_a S_b^T]_{a>c, b<c}, Y2 = [Mc[a,c] R_a]_{a>c}. Once
// per block, the columns of F = [W_c; Y1] are rotated onto its row space (F = U S V^T: F V_k = U_k S_k, k the
// values above F's own rounding, s > s_1 max(rows, cols) 2^-52) and the bottom rows [U S_bottom, Y2] onto theirs
// (its SVD, S V^T above rounding): orthogonal on each side, so the core's singular values stay those of the block, and the core shrinks
// to at most (r + k + r) x (k + r). With a semiseparable Mc (the exponential presets) k and the bottom rows are about
// r each whatever M: a 2r x 2r core.
struct BlockCompression {
    Index c = -1;
    Index k = 0;
    MatrixXd top;      // r x k: W_c V_k
    MatrixXd bottom;   // rows x (k + r): R2
    double mcc = 0.0;
};

BlockCompression compress_block(const SplitFactors& f, Index c, const std::vector<MatrixXd>& keys,
                                 const std::vector<MatrixXd>& full_queries)
{
    const Index r = f.x.cols(), m = f.mixing.rows();
    BlockCompression out;
    out.c = c;
    out.mcc = f.mixing(c, c);
    Index cols = 0, rows = 0;
    std::vector<Index> col_at(static_cast<std::size_t>(m) + 1, 0), row_at(static_cast<std::size_t>(m) + 1, 0);
    for (Index b = 0; b < c; ++b)
        col_at[static_cast<std::size_t>(b) + 1] = cols += keys[static_cast<std::size_t>(b)].rows();
    for (Index a = c + 1; a < m; ++a)
        row_at[static_cast<std::size_t>(a) + 1] = rows += full_queries[static_cast<std::size_t>(a)].rows();
    MatrixXd F = MatrixXd::Zero(r + rows, cols);
    for (Index b = 0; b < c; ++b) {
        const MatrixXd& sb = keys[static_cast<std::size_t>(b)];
        if (sb.rows() == 0)
            continue;
        F.block(0, col_at[static_cast<std::size_t>(b)], r, sb.rows()) = f.mixing(c, b) * sb.transpose();
        for (Index a = c + 1; a < m; ++a) {
            const MatrixXd& ra = full_queries[static_cast<std::size_t>(a)];
            if (ra.rows() > 0 && f.mixing(a, b) != 0.0)
                F.block(r + row_at[static_cast<std::size_t>(a)], col_at[static_cast<std::size_t>(b)], ra.rows(), sb.rows())
                    .noalias() = f.mixing(a, b) * (ra * sb.transpose());
        }
    }
    MatrixXd L(r + rows, 0);
    if (cols > 0) {
        Eigen::BDCSVD<MatrixXd> svd(F, Eigen::ComputeThinU);
        const Eigen::VectorXd& sv = svd.singularValues();
        const double tol = sv.size() > 0 ? sv(0) * static_cast<double>(std::max(F.rows(), F.cols())) *
                                               std::numeric_limits<double>::epsilon()
                                         : 0.0;
        Index k = 0;
        while (k < sv.size() && sv(k) > tol)
            ++k;
        L = svd.matrixU().leftCols(k) * sv.head(k).asDiagonal();
    }
    out.k = L.cols();
    out.top = L.topRows(r);
    MatrixXd B(rows, out.k + r);
    B.leftCols(out.k) = L.bottomRows(rows);
    for (Index a = c + 1; a < m; ++a) {
        const MatrixXd& ra = full_queries[static_cast<std::size_t>(a)];
        B.block(row_at[static_cast<std::size_t>(a)], out.k, ra.rows(), r) = f.mixing(a, c) * ra;
    }
    if (rows > 0) {   // B = U S V^T: the rows S V^T above B's own rounding span what U rotates away
        Eigen::BDCSVD<MatrixXd> svd(B, Eigen::ComputeThinV);
        const Eigen::VectorXd& sv = svd.singularValues();
        const double tol = sv.size() > 0 ? sv(0) * static_cast<double>(std::max(B.rows(), B.cols())) *
                                               std::numeric_limits<double>::epsilon()
                                         : 0.0;
        Index k2 = 0;
        while (k2 < sv.size() && sv(k2) > tol)
            ++k2;
        out.bottom = sv.head(k2).asDiagonal() * svd.matrixV().leftCols(k2).transpose();
    } else {
        out.bottom = MatrixXd(0, out.k + r);
    }
    return out;
}

bool contiguous_blocks(const SplitFactors& f)
{
    for (std::size_t t = 1; t < f.block.size(); ++t)
        if (f.block[t] < f.block[t - 1])
            return false;
    return true;
}

// The splits [first, last) of `splits` from carried factors: the key side grown from token 0 to the run's
// first split, then one token at a time.
bool carried_run(const SplitFactors& f, const CarriedQuerySide& q, const std::vector<Index>& next_in_block,
                 const std::vector<Index>& splits, std::size_t first, std::size_t last, std::optional<double> rtol,
                 std::vector<SplitRank>& out, const std::function<bool()>& keep_going)
{
    const Index n = f.x.rows(), r = f.x.cols(), m = f.mixing.rows();
    std::vector<MatrixXd> keys(static_cast<std::size_t>(m), MatrixXd(0, r));
    std::vector<Index> query_token(static_cast<std::size_t>(m), -1);   // the token whose carried R is block a's
    auto add_key = [&](Index j) {
        MatrixXd& S = keys[static_cast<std::size_t>(block_of(f, j))];
        if (f.step.size() > 0)
            S *= f.step(j);   // S'(j+1) = QR([step[j] S'(j); y_j]): rows weighted by w(j, i) up to one factor
        insert_row(S, f.y.row(j));
    };
    const bool contiguous = contiguous_blocks(f);
    BlockCompression compression;
    const Index h0 = splits[first];
    for (Index j = 0; j < h0; ++j)
        add_key(j);
    for (Index t = n - 1; t >= h0; --t)
        query_token[static_cast<std::size_t>(block_of(f, t))] = t;
    Index h = h0;
    for (std::size_t i = first; i < last; ++i) {
        for (; h < splits[i]; ++h) {   // token h leaves the query side and joins the key side
            add_key(h);
            query_token[static_cast<std::size_t>(block_of(f, h))] = next_in_block[static_cast<std::size_t>(h)];
        }
        if (keep_going && !keep_going())
            return false;
        const Index hh = splits[i];
        if (contiguous && m > 1) {
            const Index c = block_of(f, hh);
            if (compression.c != c) {
                std::vector<MatrixXd> full(static_cast<std::size_t>(m));
                for (Index a = c + 1; a < m; ++a) {
                    const Index t = query_token[static_cast<std::size_t>(a)];
                    full[static_cast<std::size_t>(a)] = t >= 0 ? q.at(t) : MatrixXd(0, r);
                }
                compression = compress_block(f, c, keys, full);
            }
            const MatrixXd Rc = q.at(query_token[static_cast<std::size_t>(c)]);
            const MatrixXd& Sc = keys[static_cast<std::size_t>(c)];
            const Index k = compression.k, top = Rc.rows(), low = compression.bottom.rows();
            MatrixXd core = MatrixXd::Zero(top + low, k + Sc.rows());
            core.topLeftCorner(top, k).noalias() = Rc * compression.top;
            if (Sc.rows() > 0) {
                core.topRightCorner(top, Sc.rows()).noalias() = compression.mcc * (Rc * Sc.transpose());
                core.bottomRightCorner(low, Sc.rows()).noalias() = compression.bottom.rightCols(r) * Sc.transpose();
            }
            core.bottomLeftCorner(low, k) = compression.bottom.leftCols(k);
            out[i] = split_rank(hh, n - hh, hh, core.size() > 0 ? singular_values(std::move(core)) : std::vector<double>{},
                                rtol);
            continue;
        }
        std::vector<MatrixXd> Rq(static_cast<std::size_t>(m));
        std::vector<Index> row_at(static_cast<std::size_t>(m) + 1, 0), col_at(static_cast<std::size_t>(m) + 1, 0);
        for (Index a = 0; a < m; ++a) {
            const Index t = query_token[static_cast<std::size_t>(a)];
            Rq[static_cast<std::size_t>(a)] = t >= 0 ? q.at(t) : MatrixXd(0, r);
            row_at[static_cast<std::size_t>(a) + 1] = row_at[static_cast<std::size_t>(a)] + Rq[static_cast<std::size_t>(a)].rows();
            col_at[static_cast<std::size_t>(a) + 1] = col_at[static_cast<std::size_t>(a)] + keys[static_cast<std::size_t>(a)].rows();
        }
        MatrixXd core = MatrixXd::Zero(row_at.back(), col_at.back());
        for (Index a = 0; a < m; ++a)
            for (Index b = 0; b < m; ++b) {
                const MatrixXd& ra = Rq[static_cast<std::size_t>(a)];
                const MatrixXd& sb = keys[static_cast<std::size_t>(b)];
                const double w = f.mixing(a, b);
                if (w == 0.0 || ra.rows() == 0 || sb.rows() == 0)
                    continue;
                core.block(row_at[static_cast<std::size_t>(a)], col_at[static_cast<std::size_t>(b)], ra.rows(), sb.rows())
                    .noalias() = w * (ra * sb.transpose());
            }
        out[i] = split_rank(hh, n - hh, hh, core.size() > 0 ? singular_values(std::move(core)) : std::vector<double>{}, rtol);
    }
    return true;
}

}  // namespace

SplitRank split_rank(Index h, Index rows, Index cols, const std::vector<double>& s, std::optional<double> rtol)
{
    SplitRank out;
    out.h = h;
    out.rows = rows;
    out.cols = cols;
    if (s.empty() || !(s.front() > 0.0))
        return out;
    const double tol = rtol ? *rtol * s.front()
                            : s.front() * static_cast<double>(std::max(rows, cols)) * std::numeric_limits<double>::epsilon();
    out.rank = static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > tol; }));
    out.energy_rank_99 = energy_rank(s, 0.99);
    return out;
}

std::vector<Index> default_splits(Index n, Index count, const std::vector<Index>& block)
{
    std::vector<Index> h;
    if (n < 2)
        return h;
    count = std::clamp<Index>(count, 0, n - 1);   // n - 1 evenly spaced splits are every split
    for (Index i = 1; i <= count; ++i)
        h.push_back(static_cast<Index>((static_cast<long double>(i) * n) / (count + 1)));
    std::vector<char> seen;
    for (std::size_t t = 0; t < block.size(); ++t) {
        const Index b = block[t];
        if (b < 0)
            continue;
        if (static_cast<std::size_t>(b) >= seen.size())
            seen.resize(static_cast<std::size_t>(b) + 1, 0);
        if (!seen[static_cast<std::size_t>(b)]) {
            seen[static_cast<std::size_t>(b)] = 1;
            h.push_back(static_cast<Index>(t));
        }
    }
    std::sort(h.begin(), h.end());
    h.erase(std::unique(h.begin(), h.end()), h.end());
    h.erase(std::remove_if(h.begin(), h.end(), [&](Index v) { return v < 1 || v > n - 1; }), h.end());
    return h;
}

std::vector<Index> all_splits(Index n)
{
    std::vector<Index> h;
    for (Index i = 1; i < n; ++i)
        h.push_back(i);
    return h;
}

std::uint64_t carried_factor_bytes(Index n, Index r)
{
    return static_cast<std::uint64_t>(n) * (packed_size(r, r) * 8 + 24);
}

std::vector<SplitRank> profile_from_factors(const SplitFactors& f, const std::vector<Index>& splits,
                                            std::optional<double> rtol, int threads,
                                            const std::function<bool()>& keep_going)
{
    check_factors(f);
    const Index n = f.x.rows();
    check_splits(splits, n);
    std::vector<SplitRank> out(splits.size());
    if (splits.empty())
        return out;
    std::atomic<bool> stopped{false};
    auto go_on = [&] {
        if (stopped.load())
            return false;
        if (keep_going && !keep_going()) {
            stopped = true;
            return false;
        }
        return true;
    };
    if (splits.size() < k_carry_from_splits) {
        for (std::size_t i = 0; i < splits.size(); ++i) {
            if (!go_on())
                return {};
            out[i] = one_split(f, splits[i], rtol);
        }
        return out;
    }
    const CarriedQuerySide q = carry_query_side(f);
    std::vector<Index> next_in_block(static_cast<std::size_t>(n), -1), last_seen(static_cast<std::size_t>(f.mixing.rows()), -1);
    for (Index t = n - 1; t >= 0; --t) {
        const auto b = static_cast<std::size_t>(block_of(f, t));
        next_in_block[static_cast<std::size_t>(t)] = last_seen[b];
        last_seen[b] = t;
    }
    // Our threads take the splits; OpenBLAS runs serially under them (each core's SVD is small, and its own
    // workers would spin against ours: 2.5x slower at d = 64 on 2 cores).
    const kernels::SerialBlas serial;
    const std::size_t runs = std::min<std::size_t>(splits.size(), static_cast<std::size_t>(std::max(threads, 1)) * 4);
    std::vector<std::string> errors(runs);
    parallel_for(runs, threads, [&](std::size_t k) {
        const std::size_t first = splits.size() * k / runs, last = splits.size() * (k + 1) / runs;
        try {
            if (first < last && !carried_run(f, q, next_in_block, splits, first, last, rtol, out, go_on))
                stopped = true;
        } catch (const std::exception& e) {
            errors[k] = e.what();
            stopped = true;
        }
        return !stopped.load();
    });
    for (const std::string& e : errors)
        if (!e.empty())
            throw std::runtime_error("past profile: " + e);
    if (stopped.load())
        return {};
    return out;
}

std::vector<SplitRank> profile_from_matrix(const Eigen::Ref<const MatrixXd>& A, const std::vector<Index>& splits,
                                           std::optional<double> rtol, const std::function<bool()>& keep_going)
{
    const Index n = A.rows();
    if (A.cols() != n)
        throw std::invalid_argument("past profile: the matrix is not square");
    check_splits(splits, n);
    std::vector<SplitRank> out;
    out.reserve(splits.size());
    for (const Index h : splits) {
        if (keep_going && !keep_going())
            return {};
        out.push_back(split_rank(h, n - h, h, singular_values(MatrixXd(A.bottomLeftCorner(n - h, h))), rtol));
    }
    return out;
}

}  // namespace attnscope::metrics
