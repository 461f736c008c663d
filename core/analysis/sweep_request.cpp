#include "analysis/sweep_request.h"

#include <stdexcept>
#include <utility>

#include "analysis/synth.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "io/tensor_file.h"

namespace attnscope::analysis {

namespace {

std::string synth_kinds_text()
{
    std::string s;
    for (const auto& k : synth_kinds())
        s += (s.empty() ? "" : " | ") + k;
    return s;
}

}  // namespace

const std::vector<OptionDescriptor<SweepRequest>>& sweep_options()
{
    using R = SweepRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        {"synth", &R::synth, "Synthetic data instead of inputs: " + synth_kinds_text()},
        {"d", &R::d, "Synthetic features per head (default 64)"},
        {"seeds", &R::seeds, "Synthetic draws, seeds S..S+K-1 (default 1)"},
        {"n", &R::n, "Synthetic tokens for --vary m"},
        {"vary", &R::vary, "n=LIST (sequence lengths) or m=LIST (block counts; block-grid sides for grid data)"},
        {"subsample", &R::subsample, "Token subsets for --vary n: first | random | crop (default first)"},
        {"draws", &R::draws, "Random subsets per N (--subsample random)"},
        {"subsample-seed", &R::subsample_seed, "Seed of random subsets and of synthetic draws (default 0)"},
        OptionDescriptor<R>{"heads", &R::heads, "all or a comma list of heads (default: the selection's)"}.as_list(),
        OptionDescriptor<R>{"layers", &R::layers, "all or a comma list of layers (axis l; default: the selection's)"}.as_list(),
    };
    return table;
}

SweepSpec resolve_sweep(const SweepRequests& r, Spelling spelling)
{
    const auto name = [spelling](std::string_view option) { return option_name(option, spelling); };
    const SweepRequest& s = r.sweep;
    SweepSpec spec;
    const std::string& vary = s.vary;
    if (vary.size() < 2 || (vary[0] != 'n' && vary[0] != 'm') || (vary.size() > 1 && vary[1] != '='))
        throw std::invalid_argument(name("vary") + (spelling == Spelling::flag ? " " : "=") + vary +
                                    ": expected n=LIST or m=LIST, e.g. n=256,1024,4096");
    spec.vary = vary[0];
    if (vary.size() > 2)
        spec.values = parse_sizes(vary.substr(2), name("vary"));
    spec.subsample = parse_subsample(s.subsample);
    spec.draws = s.draws;   // checked with every other sweep setting by plan_sweep
    if (s.subsample_seed < 0)
        throw std::invalid_argument(name("subsample-seed") + " " + std::to_string(s.subsample_seed) + " must be non-negative");
    spec.seed = static_cast<std::uint64_t>(s.subsample_seed);
    spec.heads = AxisChoice::parse(s.heads, name("heads"));
    spec.layers = AxisChoice::parse(s.layers, name("layers"));
    assign_analysis(spec, resolve_analysis(r.mechanisms, r.analysis, spelling));

    if (!s.synth.empty()) {
        if (!r.q.empty() || !r.k.empty())
            throw std::invalid_argument(spelling == Spelling::flag ? "give either --synth or --q/--k inputs, not both"
                                                                   : "give either synth or q/k inputs, not both");
        spec.synth = SynthSource{s.synth, s.d, s.seeds, s.n};
    } else {
        if (r.q.empty() || r.q.size() != r.k.size()) {
            const std::string q = spelling == Spelling::flag ? "--q" : "q", k = spelling == Spelling::flag ? "--k" : "k";
            throw std::invalid_argument("give " + q + " and " + k + " in pairs (got " + std::to_string(r.q.size()) + " " + q +
                                        " and " + std::to_string(r.k.size()) + " " + k + "), or " + name("synth") +
                                        (spelling == Spelling::flag ? " KIND" : "=KIND"));
        }
        const io::AxisSelection sel = resolve(r.analysis.selection, spelling);
        for (std::size_t i = 0; i < r.q.size(); ++i)
            spec.inputs.push_back({r.q[i], r.k[i], std::nullopt, sel});
    }
    return spec;
}

}  // namespace attnscope::analysis
