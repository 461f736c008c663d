// Running a planned sweep (run_sweep, analysis/sweep.h): every point of every unit analysed under every
// mechanism, with progress shared evenly among the points and cancellation inside each analysis.
#include "analysis/sweep.h"


#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "analysis/synth.h"
#include "attention/blocks.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/names.h"
#include "util/rng.h"

namespace attnscope::analysis {

using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

MatrixXd take_rows(const MatrixXd& x, const std::vector<Index>& rows)
{
    MatrixXd out(static_cast<Index>(rows.size()), x.cols());
    for (std::size_t i = 0; i < rows.size(); ++i)
        out.row(static_cast<Index>(i)) = x.row(rows[i]);
    return out;
}

// Where one point's analyses sit in the whole sweep's progress: [base, base + span), under `label`.
struct PointProgress {
    const JobContext& ctx;
    double base = 0, span = 0;
    std::string label;
};

// Analyses one Q, K pair under every mechanism, one timed analyze() each. Each analysis reports its stages
// as its share of the point's span and is cancelled inside (analyze's JobContext), not only between points.
void analyse_point(const SweepSpec& spec, const MatrixXd& q, const MatrixXd& k, const SweepPoint& p, const std::string& input,
                   std::optional<Index> layer, std::optional<Index> head, std::uint64_t limit, const PointProgress& where,
                   std::vector<SweepRecord>& out)
{
    Index m = 0;
    try {
        m = attention::make_blocks(p.options.blocks, q.rows()).num_blocks;
    } catch (const std::invalid_argument&) {
        m = 0;   // no valid MHLA layout for this N (only matters if MHLA is swept)
    }
    const double count = static_cast<double>(spec.mechanisms.size());
    for (std::size_t i = 0; i < spec.mechanisms.size(); ++i) {
        const Mechanism mech = spec.mechanisms[i];
        JobContext sub;
        sub.token = where.ctx.token;
        if (where.ctx.on_progress)
            sub.on_progress = [&where, i, count](double f, const std::string& stage) {
                where.ctx.on_progress(where.base + where.span * (static_cast<double>(i) + f) / count, where.label + ", " + stage);
            };
        const auto start = std::chrono::steady_clock::now();
        auto results = analyze(q, k, {mech}, p.options, spec.metrics, limit, &sub);
        SweepRecord r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.mechanism = std::string(attention::to_string(mech));
        r.n = q.rows();
        r.m = m;
        r.d = q.cols();
        r.layer = layer;
        r.head = head;
        r.draw = p.draw;
        r.input = input;
        r.result = std::move(results.front());
        out.push_back(std::move(r));
    }
}

// "M=4": the block count, or the block grid's side(s).
std::string m_label(const SweepPoint& p)
{
    const auto& b = p.options.blocks;
    return "M=" + (b.kind == attention::BlockSpec::Kind::grid ? sizes_text(b.block_grid, "x") : std::to_string(b.blocks));
}

// "N=64", with M when M varies and the draw when there are several.
std::string point_label(const SweepSpec& spec, const SweepPoint& p)
{
    std::string label = "N=" + std::to_string(p.n);
    if (spec.vary == 'm')
        label.append(" ").append(m_label(p));   // append(): g++ 12 warns falsely on "literal" + std::string&&
    if (spec.subsample == Subsample::random && spec.draws > 1)
        label.append(" draw ").append(std::to_string(p.draw));
    return label;
}

// "file.h5:/q h=2": the queries without their folder, and the unit's layer and head.
std::string unit_label(const Unit& u)
{
    std::string ref = u.source.q_ref.text;
    const std::size_t colon = ref.find(':');
    const std::size_t slash = ref.rfind('/', colon == std::string::npos ? std::string::npos : colon);
    if (slash != std::string::npos)
        ref = ref.substr(slash + 1);
    if (u.layer)
        ref += " l=" + std::to_string(*u.layer);
    if (u.head)
        ref += " h=" + std::to_string(*u.head);
    for (const auto& [axis, index] : u.at)
        ref.append(" ").append(1, axis).append("=").append(std::to_string(index));
    return ref;
}

}  // namespace

std::vector<SweepRecord> run_sweep(const SweepPlan& plan, const JobContext& ctx)
{
    const SweepSpec& spec = plan.spec;
    const std::uint64_t limit = spec.memory_limit ? spec.memory_limit : default_memory_limit();
    std::vector<SweepRecord> records;
    // Every point (of every draw) has the same share of the progress.
    double points = 0;
    for (const SweepJob& job : plan.jobs)
        points += static_cast<double>(job.points.size());
    if (spec.synth) {
        const SynthSource& s = *spec.synth;
        const double total = std::max(1.0, points * static_cast<double>(s.seeds));
        double done = 0;
        for (Index draw = 0; draw < s.seeds; ++draw)
            for (const SweepJob& job : plan.jobs) {
                const Index n = job.synth_n;
                const std::string what = fmt::format("synth {} N={} seed {}", s.kind, n, spec.seed + static_cast<std::uint64_t>(draw));
                ctx.progress(done / total, what);
                SynthOptions so;
                so.n = n;
                so.d = s.d;
                so.kind = s.kind;
                so.seed = spec.seed + static_cast<std::uint64_t>(draw);
                const SynthData data = synthesize(so, limit);
                using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
                const MatrixXd q = Eigen::Map<const RowMajor>(data.q.data(), n, s.d);
                const MatrixXd k = Eigen::Map<const RowMajor>(data.k.data(), n, s.d);
                for (SweepPoint p : job.points) {
                    p.draw = draw;
                    const std::string label = spec.vary == 'm' ? what + " " + m_label(p) : what;
                    ctx.progress(done / total, label);
                    analyse_point(spec, q, k, p, "synth:" + s.kind, std::nullopt, std::nullopt, limit,
                                  PointProgress{ctx, done / total, 1.0 / total, label}, records);
                    ++done;
                }
            }
        ctx.progress(1.0, "done");
        return records;
    }
    const double total = std::max(1.0, points);
    double done = 0;
    for (const SweepJob& job : plan.jobs) {
        const Unit& u = *job.unit;
        const std::string unit = unit_label(u);
        const std::size_t first_record = records.size();
        ctx.progress(done / total, unit + " reading");
        const LoadedInputs in = load_inputs(u.source.q_ref, u.source.k_ref, std::nullopt, u.source.selection);
        std::optional<Eigen::VectorXd> gates;   // gated's gates: read once per unit, not once per point
        for (SweepPoint p : job.points) {
            if (!p.options.gates.source.empty() && p.options.gates.values.size() == 0) {
                if (!gates)
                    gates = load_gates(p.options.gates, in.q);
                p.options.gates.values = *gates;
            }
            p.options = options_for_inputs(p.options, in);
            if (!p.tokens.empty() && p.options.gates.values.size() == in.q.values.rows())   // the gates of the tokens taken
                p.options.gates.values = take_rows(Eigen::MatrixXd(p.options.gates.values), p.tokens);
            const std::string label = unit + " " + point_label(spec, p);
            ctx.progress(done / total, label);
            const PointProgress where{ctx, done / total, 1.0 / total, label};
            if (p.tokens.empty())
                analyse_point(spec, in.q.values, in.k.values, p, u.source.q_ref.text, u.layer, u.head, limit, where, records);
            else
                analyse_point(spec, take_rows(in.q.values, p.tokens), take_rows(in.k.values, p.tokens), p, u.source.q_ref.text,
                              u.layer, u.head, limit, where, records);
            ++done;
        }
        for (std::size_t r = first_record; r < records.size(); ++r)
            records[r].at = u.at;
    }
    ctx.progress(1.0, "done");
    return records;
}

}  // namespace attnscope::analysis
