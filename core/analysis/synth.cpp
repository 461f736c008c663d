#include "analysis/synth.h"

#include "io/writers.h"
#include "util/output.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "util/checked.h"
#include "util/error.h"
#include "util/rng.h"

namespace attnscope::analysis {

using Index = Eigen::Index;
using Eigen::MatrixXd;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Geometric frequencies from w_max down to w_min (count >= 1).
std::vector<double> geometric_frequencies(Index count, double w_max, double w_min)
{
    std::vector<double> w(static_cast<std::size_t>(count));
    for (Index i = 0; i < count; ++i) {
        const double t = count == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(count - 1);
        w[static_cast<std::size_t>(i)] = w_max * std::pow(w_min / w_max, t);
    }
    return w;
}

MatrixXd gaussian_matrix(SplitMix64& rng, Index rows, Index cols, double sd = 1.0)
{
    MatrixXd m(rows, cols);
    for (Index i = 0; i < rows; ++i)
        for (Index j = 0; j < cols; ++j)
            m(i, j) = sd * rng.normal();
    return m;
}

// Writes `m` (N by d) into the row-major [h][t][f] buffer.
void store_head(std::vector<double>& out, Index head, const MatrixXd& m)
{
    const Index n = m.rows(), d = m.cols();
    double* base = out.data() + head * n * d;
    for (Index t = 0; t < n; ++t)
        for (Index f = 0; f < d; ++f)
            base[t * d + f] = m(t, f);
}

// Sinusoidal features of the positions `pos` (N values) at frequencies w: columns [cos w0 p, sin w0 p, ...].
MatrixXd sinusoids(const std::vector<double>& pos, const std::vector<double>& w, double phase_seed_scale, SplitMix64& rng)
{
    const Index n = static_cast<Index>(pos.size());
    const Index nf = static_cast<Index>(w.size());
    MatrixXd m(n, 2 * nf);
    for (Index i = 0; i < nf; ++i) {
        const double phase = phase_seed_scale * 2.0 * kPi * rng.uniform();
        for (Index t = 0; t < n; ++t) {
            const double a = w[static_cast<std::size_t>(i)] * pos[static_cast<std::size_t>(t)] + phase;
            m(t, 2 * i) = std::cos(a);
            m(t, 2 * i + 1) = std::sin(a);
        }
    }
    return m;
}

struct Head {
    MatrixXd q, k, v;
};

Head make_gaussian(SplitMix64& rng, Index n, Index d)
{
    return {gaussian_matrix(rng, n, d), gaussian_matrix(rng, n, d), gaussian_matrix(rng, n, d)};
}

Head make_lowrank(SplitMix64& rng, Index n, Index d)
{
    const Index r = std::max<Index>(2, d / 8);
    const MatrixXd z = gaussian_matrix(rng, n, r);
    const double s = 1.0 / std::sqrt(static_cast<double>(r));
    const MatrixXd aq = gaussian_matrix(rng, r, d, s), ak = gaussian_matrix(rng, r, d, s), av = gaussian_matrix(rng, r, d, s);
    Head h;
    h.q = z * aq + gaussian_matrix(rng, n, d, 0.05);
    h.k = z * ak + gaussian_matrix(rng, n, d, 0.05);
    h.v = z * av + gaussian_matrix(rng, n, d, 0.05);
    return h;
}

// Positional part: q.k * (1/sqrt d) = beta * mean_i cos(w_i (t - j)), a kernel that peaks at t = j.
Head make_local1d(SplitMix64& rng, Index n, Index d)
{
    const Index nf = std::max<Index>(1, d / 2);
    const double beta = 8.0 + 6.0 * rng.uniform();                 // sharpness differs per head
    const double w_max = kPi / (1.0 + 2.0 * rng.uniform());         // finest wavelength 2..6 tokens
    const double w_min = kPi / std::max<double>(4.0, static_cast<double>(n));
    std::vector<double> pos(static_cast<std::size_t>(n));
    for (Index t = 0; t < n; ++t)
        pos[static_cast<std::size_t>(t)] = static_cast<double>(t);
    MatrixXd feat = sinusoids(pos, geometric_frequencies(nf, w_max, w_min), 1.0, rng);
    const double c = std::sqrt(beta * std::sqrt(static_cast<double>(d)) / static_cast<double>(nf));
    Head h;
    h.q = gaussian_matrix(rng, n, d, 0.3);
    h.k = gaussian_matrix(rng, n, d, 0.3);
    const Index used = std::min<Index>(2 * nf, d);
    h.q.leftCols(used) += c * feat.leftCols(used);
    h.k.leftCols(used) += c * feat.leftCols(used);
    h.v = gaussian_matrix(rng, n, d);
    return h;
}

// Grid tokens: 2-D positional sinusoids (row and column) in the first half of the features, a smooth
// random spatial field (a few low-frequency plane waves per feature) shared by queries and keys in the rest.
Head make_local2d(SplitMix64& rng, Index n, Index d, Index gh, Index gw)
{
    const Index pos_pairs = std::max<Index>(1, d / 8);              // per axis
    const Index pos_cols = std::min<Index>(4 * pos_pairs, d);
    const double beta = 8.0 + 6.0 * rng.uniform();
    std::vector<double> ys(static_cast<std::size_t>(n)), xs(static_cast<std::size_t>(n));
    for (Index t = 0; t < n; ++t) {
        ys[static_cast<std::size_t>(t)] = static_cast<double>(t / gw);
        xs[static_cast<std::size_t>(t)] = static_cast<double>(t % gw);
    }
    const double w_max = kPi / (1.0 + 1.5 * rng.uniform());
    const MatrixXd fy = sinusoids(ys, geometric_frequencies(pos_pairs, w_max, kPi / std::max<double>(4.0, gh)), 1.0, rng);
    const MatrixXd fx = sinusoids(xs, geometric_frequencies(pos_pairs, w_max, kPi / std::max<double>(4.0, gw)), 1.0, rng);
    MatrixXd pos(n, 4 * pos_pairs);
    pos << fy, fx;
    const double c_pos = std::sqrt(beta * std::sqrt(static_cast<double>(d)) / static_cast<double>(2 * pos_pairs));

    const Index content_cols = d - pos_cols;
    MatrixXd field = MatrixXd::Zero(n, content_cols);
    for (Index f = 0; f < content_cols; ++f) {
        for (int wave = 0; wave < 3; ++wave) {
            const double ky = 2.0 * kPi * (rng.uniform() * 2.5) / static_cast<double>(gh);
            const double kx = 2.0 * kPi * (rng.uniform() * 2.5) / static_cast<double>(gw);
            const double ph = 2.0 * kPi * rng.uniform();
            const double amp = rng.normal();
            for (Index t = 0; t < n; ++t)
                field(t, f) += amp * std::cos(ky * ys[static_cast<std::size_t>(t)] + kx * xs[static_cast<std::size_t>(t)] + ph);
        }
    }
    if (content_cols > 0) {
        const double rms = std::sqrt(field.squaredNorm() / static_cast<double>(field.size()));
        if (rms > 0)
            field /= rms;
    }
    // Content adds a few nats of preference for similar tokens on top of the positional kernel.
    const double c_content = content_cols > 0 ? std::sqrt(3.0 * std::sqrt(static_cast<double>(d)) / static_cast<double>(content_cols)) : 0.0;

    Head h;
    h.q = gaussian_matrix(rng, n, d, 0.2);
    h.k = gaussian_matrix(rng, n, d, 0.2);
    h.q.leftCols(pos_cols) += c_pos * pos.leftCols(pos_cols);
    h.k.leftCols(pos_cols) += c_pos * pos.leftCols(pos_cols);
    if (content_cols > 0) {
        h.q.rightCols(content_cols) += c_content * field;
        h.k.rightCols(content_cols) += c_content * field;
    }
    h.v = gaussian_matrix(rng, n, d, 0.3);
    if (content_cols > 0)
        h.v.rightCols(content_cols) += field;
    return h;
}

}  // namespace

std::vector<std::string> synth_kinds() { return {"gaussian", "lowrank", "local1d", "local2d"}; }

std::vector<Index> check_synth_options(const SynthOptions& o, std::uint64_t max_bytes)
{
    if (o.n < 1)
        throw std::invalid_argument("--n must be at least 1 (got " + std::to_string(o.n) + ")");
    if (o.d < 1)
        throw std::invalid_argument("--d must be at least 1 (got " + std::to_string(o.d) + ")");
    if (o.heads < 1)
        throw std::invalid_argument("--heads must be at least 1 (got " + std::to_string(o.heads) + ")");
    bool known = false;
    for (const auto& k : synth_kinds())
        known = known || k == o.kind;
    if (!known)
        throw std::invalid_argument("--kind " + o.kind + " is not one of gaussian, lowrank, local1d, local2d");

    const long double values = static_cast<long double>(o.heads) * o.n * o.d;
    const long double bytes = values * 3.0L * (8.0L + 4.0L);   // doubles in memory, float32 on disk
    if (bytes > static_cast<long double>(max_bytes))
        throw InputError("synth: " + std::to_string(o.heads) + " x " + std::to_string(o.n) + " x " + std::to_string(o.d) +
                         " activations need " + std::to_string(static_cast<unsigned long long>(bytes / 1048576.0L)) +
                         " MiB, over the limit of " + std::to_string(max_bytes / 1048576) + " MiB");

    std::vector<Index> grid = o.grid;
    if (!grid.empty()) {
        if (grid.size() != 2)
            throw std::invalid_argument("--grid takes two sizes H,W for synth");
        const std::optional<Index> cells = checked_product(grid);   // a product that wraps could pass for N
        if (grid[0] < 1 || grid[1] < 1 || !cells || *cells != o.n)
            throw std::invalid_argument("--grid " + std::to_string(grid[0]) + "," + std::to_string(grid[1]) + " has " +
                                        (cells ? std::to_string(*cells) : std::string("more than 2^63")) +
                                        " tokens but --n is " + std::to_string(o.n));
    } else if (o.kind == "local2d") {
        const auto s = static_cast<Index>(std::llround(std::sqrt(static_cast<double>(o.n))));
        if (s * s != o.n)
            throw std::invalid_argument("local2d needs --grid H,W with H*W = N (N=" + std::to_string(o.n) + " is not a square)");
        grid = {s, s};
    }
    return grid;
}

SynthData synthesize(const SynthOptions& o, std::uint64_t max_bytes)
{
    const std::vector<Index> grid = check_synth_options(o, max_bytes);

    SynthData out;
    const std::size_t total = static_cast<std::size_t>(o.heads * o.n * o.d);
    out.q.resize(total);
    out.k.resize(total);
    out.v.resize(total);
    SplitMix64 rng(o.seed);
    for (Index h = 0; h < o.heads; ++h) {
        Head head;
        if (o.kind == "gaussian")
            head = make_gaussian(rng, o.n, o.d);
        else if (o.kind == "lowrank")
            head = make_lowrank(rng, o.n, o.d);
        else if (o.kind == "local1d")
            head = make_local1d(rng, o.n, o.d);
        else
            head = make_local2d(rng, o.n, o.d, grid[0], grid[1]);
        store_head(out.q, h, head.q);
        store_head(out.k, h, head.k);
        store_head(out.v, h, head.v);
    }
    out.attributes = nlohmann::json::object();
    out.attributes["kind"] = o.kind;
    out.attributes["seed"] = o.seed;
    if (!grid.empty())
        out.attributes["grid"] = grid;
    out.attributes["n"] = o.n;
    out.attributes["d"] = o.d;
    out.attributes["heads"] = o.heads;
    out.attributes["generator"] = std::string("attnscope synth ") + ATTNSCOPE_VERSION;
    return out;
}

void write_synthetic_file(const std::string& path, const SynthOptions& o, std::uint64_t max_bytes)
{
    OutputFile out(path, SpecialFiles::refuse);   // a device or FIFO is refused before the work
    SynthData data = synthesize(o, max_bytes);
    std::vector<io::DatasetOut> datasets;
    for (auto [name, values] : {std::pair{"/q", &data.q}, std::pair{"/k", &data.k}, std::pair{"/v", &data.v}}) {
        io::DatasetOut ds;
        ds.name = name;
        ds.shape = {o.heads, o.n, o.d};
        ds.data = std::move(*values);
        ds.as_float32 = true;
        ds.compress = true;
        datasets.push_back(std::move(ds));
    }
    out.write([&](const std::string& temp) { io::write_hdf5(temp, datasets, data.attributes); });
    out.commit();
}

}  // namespace attnscope::analysis
