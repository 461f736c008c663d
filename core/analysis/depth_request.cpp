#include "analysis/depth_request.h"

#include <optional>
#include <regex>
#include <stdexcept>
#include <utility>

#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "io/tensor_file.h"

namespace attnscope::analysis {

namespace {

// The queries' and keys' names when none are given: q and k when the file holds them (an `l` axis), else the
// lowest-numbered per-layer pair /layers/<i>/q, /layers/<i>/k (as the PyTorch bridge writes them).
std::pair<std::string, std::string> depth_default_names(const std::string& file)
{
    const auto f = io::open_tensor_file(file);
    std::optional<long long> lowest;
    for (const io::TensorInfo& t : f->tensors()) {
        if (t.name == "q" || t.name == "/q")
            return {"q", "k"};
        std::smatch m;
        static const std::regex per_layer(R"(^/?layers/([0-9]{1,9})/q$)");
        if (std::regex_match(t.name, m, per_layer)) {
            const long long i = std::stoll(m[1].str());
            if (!lowest || i < *lowest)
                lowest = i;
        }
    }
    if (!lowest)
        return {"q", "k"};   // the planner names what the file holds
    const std::string prefix = "/layers/" + std::to_string(*lowest) + "/";
    return {prefix + "q", prefix + "k"};
}

}  // namespace

const std::vector<OptionDescriptor<DepthSettings>>& depth_options()
{
    using R = DepthSettings;
    static const std::vector<OptionDescriptor<R>> table = {
        {"q", &R::q, "Queries' dataset name in FILE (default q, else the file's first per-layer /layers/<i>/q)"},
        {"k", &R::k, "Keys' dataset name in FILE (default k, else the first per-layer /layers/<i>/k)"},
        OptionDescriptor<R>{"layers", &R::layers, "all (default) or a comma list of layers, multiplied in ascending order"}
            .as_list(),
        {"heads", &R::heads, "mean: A_l is the mean over the layer's heads (default; one head: --head H)"},
        {"alpha", &R::alpha, "Weight of the attention path, in [0, 1] (default 0.5; 1: no residual path)"},
    };
    return table;
}

DepthRequest resolve_depth(const DepthRequests& r, Spelling spelling)
{
    const auto name = [spelling](std::string_view option) { return option_name(option, spelling); };
    const DepthSettings& a = r.depth;
    DepthRequest req;
    BatchPlan& plan = req.plan;
    plan.files = {r.file};
    if (a.q.empty() || a.k.empty()) {
        const auto [q, k] = depth_default_names(r.file);
        plan.q_name = a.q.empty() ? q : a.q;
        plan.k_name = a.k.empty() ? k : a.k;
    } else {
        plan.q_name = a.q;
        plan.k_name = a.k;
    }
    plan.selection = resolve(r.analysis.selection, spelling);
    plan.layers = AxisChoice::parse(a.layers, name("layers"));
    req.head_mean = !r.analysis.selection.head && !plan.selection.at.count('h');
    const std::string sep = spelling == Spelling::flag ? " " : "=";
    if (!a.heads.empty() && a.heads != "mean")
        throw std::invalid_argument(name("heads") + sep + a.heads + ": only 'mean' (the mean over every head); one head is " +
                                    name("head") + sep + "H");
    if (!a.heads.empty() && !req.head_mean)
        throw std::invalid_argument("give " + name("heads") + sep + "mean or " + name("head") + sep + "H, not both");
    plan.heads = req.head_mean ? AxisChoice::all(name("heads")) : AxisChoice::parse("", name("head"));
    assign_analysis(plan, resolve_analysis(r.mechanisms, r.analysis, spelling));
    req.alpha = a.alpha;
    return req;
}

}  // namespace attnscope::analysis
