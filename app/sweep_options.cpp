#include "sweep_options.h"

#include <cstdio>
#include <stdexcept>

#include <unistd.h>

#include "analysis/synth.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "io/tensor_file.h"
#include "util/names.h"

namespace attnscope::app {

namespace {

std::string synth_kinds_text()
{
    std::string s;
    for (const auto& k : analysis::synth_kinds())
        s += (s.empty() ? "" : " | ") + k;
    return s;
}

}  // namespace

void SweepOptions::add_to(CLI::App& cmd, bool vary_required)
{
    cmd.add_option("--q", q, "Queries FILE[:NAME] (repeat with --k for several inputs)")->take_all()->allow_extra_args(false);
    cmd.add_option("--k", k, "Keys FILE[:NAME]")->take_all()->allow_extra_args(false);
    cmd.add_option("--synth", synth_kind, "Synthetic data instead of inputs: " + synth_kinds_text());
    cmd.add_option("--d", d, "Synthetic features per head (default 64)");
    cmd.add_option("--seeds", seeds, "Synthetic draws, seeds S..S+K-1 (default 1)");
    cmd.add_option("--n", n, "Synthetic tokens for --vary m");
    auto* v = cmd.add_option("--vary", vary, "n=LIST (sequence lengths) or m=LIST (block counts; block-grid sides for grid data)");
    if (vary_required)
        v->required();
    cmd.add_option("--subsample", subsample, "Token subsets for --vary n: first | random | crop (default first)");
    cmd.add_option("--draws", draws, "Random subsets per N (--subsample random)");
    cmd.add_option("--subsample-seed", subsample_seed, "Seed of random subsets and of synthetic draws (default 0)");
    cmd.add_option("--heads", heads, "all or a comma list of heads (default: the selection's)");
    cmd.add_option("--layers", layers, "all or a comma list of layers (axis l; default: the selection's)");
    cmd.add_option("--mechanism", mechanisms, "Comma list of " + joined(attention::mechanism_names()) + " (default " + attention::default_mechanism_text() + ")");
    selection.add_to(cmd);
    mechanism.add_to(cmd);
    metrics.add_to(cmd);
    memory.add_to(cmd);
}

analysis::SweepSpec SweepOptions::resolve() const
{
    analysis::SweepSpec spec;
    if (vary.size() < 2 || (vary[0] != 'n' && vary[0] != 'm') || (vary.size() > 1 && vary[1] != '='))
        throw std::invalid_argument("--vary " + vary + ": expected n=LIST or m=LIST, e.g. n=256,1024,4096");
    spec.vary = vary[0];
    if (vary.size() > 2)
        spec.values = analysis::parse_sizes(vary.substr(2), "--vary");
    spec.subsample = analysis::parse_subsample(subsample);
    spec.draws = draws;   // checked with every other sweep setting by analysis::plan_sweep
    if (subsample_seed < 0)
        throw std::invalid_argument("--subsample-seed " + std::to_string(subsample_seed) + " must be non-negative");
    spec.seed = static_cast<std::uint64_t>(subsample_seed);
    spec.heads = analysis::AxisChoice::parse(heads, "--heads");
    spec.layers = analysis::AxisChoice::parse(layers, "--layers");
    spec.mechanisms = analysis::parse_mechanisms(mechanisms);
    spec.options = mechanism.resolve();
    spec.given = explicit_choices(selection, mechanism);
    spec.metrics = metrics.resolve();
    spec.memory_limit = memory.resolve();
    io::set_read_limit_bytes(spec.memory_limit);

    if (!synth_kind.empty()) {
        if (!q.empty() || !k.empty())
            throw std::invalid_argument("give either --synth or --q/--k inputs, not both");
        spec.synth = analysis::SynthSource{synth_kind, d, seeds, n};
    } else {
        if (q.empty() || q.size() != k.size())
            throw std::invalid_argument("give --q and --k in pairs (got " + std::to_string(q.size()) + " --q and " +
                                        std::to_string(k.size()) + " --k), or --synth KIND");
        const io::AxisSelection sel = selection.resolve();
        for (std::size_t i = 0; i < q.size(); ++i)
            spec.inputs.push_back({q[i], k[i], std::nullopt, sel});
    }
    return spec;
}

std::vector<analysis::SweepRecord> run_sweep_with_progress(const analysis::SweepPlan& plan)
{
    analysis::JobContext ctx;
    const bool tty = ::isatty(2);
    ctx.on_progress = [&](double f, const std::string& stage) {
        if (tty)
            std::fprintf(stderr, "\r[%3.0f%%] %-70.70s", 100.0 * f, stage.c_str());
    };
    auto records = analysis::run_sweep(plan, ctx);
    if (tty)
        std::fprintf(stderr, "\r%-80s\r", "");
    return records;
}

}  // namespace attnscope::app
