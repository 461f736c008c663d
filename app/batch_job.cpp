#include "batch_job.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <set>
#include <type_traits>
#include <variant>

#include <toml++/toml.h>

#include "analysis/inputs.h"
#include "analysis/sweep_request.h"
#include "analysis/vocabulary.h"
#include "attention/mixing.h"
#include "cli_options.h"
#include "util/error.h"

namespace attnscope::app {

namespace fs = std::filesystem;

namespace {

class JobReader {
public:
    explicit JobReader(std::string path) : m_path(std::move(path)) {}

    [[noreturn]] void fail(const toml::node* node, const std::string& what) const
    {
        std::string where = m_path;
        if (node && node->source().begin.line > 0)
            where += ":" + std::to_string(node->source().begin.line);
        throw InputError(where + ": " + what);
    }

    void check_keys(const toml::table& t, const std::set<std::string>& known, const std::string& section) const
    {
        for (const auto& [key, node] : t) {
            const std::string k(key.str());
            if (!known.count(k)) {
                std::string list;
                for (const auto& n : known)
                    list += (list.empty() ? "" : ", ") + n;
                fail(&node, "unknown key '" + k + "' in " + section + " (known: " + list + ")");
            }
        }
    }

    // The value of `key` as T when it has exactly that TOML type, nothing when it is absent; otherwise an
    // error saying what it must be (`what`: "a string").
    template <class T>
    std::optional<T> exact(const toml::table& t, const char* key, const char* what) const
    {
        const toml::node* n = t.get(key);
        if (!n)
            return std::nullopt;
        std::optional<T> v = n->value_exact<T>();
        if (!v)
            fail(n, std::string("'") + key + "' must be " + what);
        return v;
    }

    std::optional<std::string> str(const toml::table& t, const char* key) const
    {
        return exact<std::string>(t, key, "a string");
    }

    std::optional<std::int64_t> integer(const toml::table& t, const char* key) const
    {
        return exact<std::int64_t>(t, key, "an integer");
    }

    std::optional<double> number(const toml::table& t, const char* key) const
    {
        const toml::node* n = t.get(key);
        if (!n)
            return std::nullopt;
        if (n->is_integer())
            return static_cast<double>(n->as_integer()->get());
        if (!n->is_floating_point())
            fail(n, std::string("'") + key + "' must be a number");
        return n->as_floating_point()->get();
    }

    std::optional<bool> boolean(const toml::table& t, const char* key) const
    {
        return exact<bool>(t, key, "true or false");
    }

    // A string, or an array of strings / integers, as the CLI's comma list.
    std::optional<std::string> list(const toml::table& t, const char* key) const
    {
        const toml::node* n = t.get(key);
        if (!n)
            return std::nullopt;
        if (n->is_string())
            return std::string(*n->as_string());
        if (n->is_integer())
            return std::to_string(n->as_integer()->get());
        if (!n->is_array())
            fail(n, std::string("'") + key + "' must be a string or an array");
        std::string out;
        for (const auto& item : *n->as_array()) {
            std::string v;
            if (item.is_string())
                v = std::string(*item.as_string());
            else if (item.is_integer())
                v = std::to_string(item.as_integer()->get());
            else
                fail(&item, std::string("'") + key + "' items must be strings or integers");
            out += (out.empty() ? "" : ",") + v;
        }
        return out;
    }

    const toml::table* table(const toml::table& t, const char* key) const
    {
        const toml::node* n = t.get(key);
        if (!n)
            return nullptr;
        if (!n->is_table())
            fail(n, std::string("'") + key + "' must be a table [" + key + "]");
        return n->as_table();
    }

    void refuse_nul(const toml::node& node) const
    {
        if (const toml::table* t = node.as_table()) {
            for (const auto& [key, child] : *t) {
                if (key.str().find('\0') != std::string_view::npos)
                    fail(&child, "a key holds a NUL character (\\u0000)");
                refuse_nul(child);
            }
        } else if (const toml::array* a = node.as_array()) {
            for (const auto& child : *a)
                refuse_nul(child);
        } else if (const auto* s = node.as_string(); s && s->get().find('\0') != std::string::npos) {
            fail(&node, "a string holds a NUL character (\\u0000): a path or name is cut there when the system reads it");
        }
    }

private:
    std::string m_path;
};

// `inputs`: files or globs relative to the job's folder.
std::vector<std::string> read_inputs(const toml::table& root, const JobReader& r, const std::string& base)
{
    const toml::node* inputs = root.get("inputs");
    if (!inputs)
        r.fail(nullptr, "'inputs' is required: files or globs, e.g. inputs = [\"acts/*.h5\"]");
    std::vector<std::string> patterns;
    if (inputs->is_string()) {
        patterns.emplace_back(*inputs->as_string());
    } else if (inputs->is_array()) {
        for (const auto& item : *inputs->as_array()) {
            if (!item.is_string())
                r.fail(&item, "'inputs' must list strings");
            patterns.emplace_back(*item.as_string());
        }
    } else {
        r.fail(inputs, "'inputs' must be a string or an array of strings");
    }
    return analysis::expand_inputs(patterns, base);
}

// Tensor names, the selection, heads, layers, mechanisms and the memory limit (the job's top level).
void read_selection(const toml::table& root, const JobReader& r, analysis::BatchPlan& plan, SelectionArgs& sel)
{
    plan.q_name = r.str(root, "q").value_or("q");
    plan.k_name = r.str(root, "k").value_or("k");
    sel.layout = r.str(root, "layout").value_or("");
    if (const toml::table* at = r.table(root, "at")) {
        std::string text;
        for (const auto& [key, node] : *at) {
            const bool all = node.is_string() && node.as_string()->get() == "all";   // every index its own unit
            if (!node.is_integer() && !all)
                r.fail(&node, "'at." + std::string(key.str()) + "' must be an integer or \"all\"");
            text += (text.empty() ? "" : ",") + std::string(key.str()) + "=" +
                    (all ? std::string("all") : std::to_string(node.as_integer()->get()));
        }
        sel.at = text;
    }
    sel.prefix_tokens = r.integer(root, "prefix_tokens");
    plan.selection = sel.resolve();
    plan.heads = analysis::AxisChoice::parse(r.list(root, "heads").value_or(""), "heads");
    plan.layers = analysis::AxisChoice::parse(r.list(root, "layers").value_or(""), "layers");
    if (auto m = r.list(root, "mechanisms"))
        plan.mechanisms = analysis::parse_mechanisms(*m, "mechanisms");
    MaxMemoryArg mem;
    mem.max_memory = r.str(root, "max_memory").value_or("");
    plan.memory_limit = mem.max_memory.empty() ? 0 : mem.resolve();
}

// [attention]: the mechanism options, a mixing file relative to the job.
// The keys of a request's descriptors (analysis/requests.h) in the table `t`, each in its job spelling
// (favor_features) and TOML type: true or false for a switch, an integer, a number, a string (a comma list may
// be an array or one integer).
// `extra`: the section's own keys besides the descriptors' (read by the caller).
template <class Request>
void read_request(const toml::table& t, const JobReader& r, Request& request,
                  const std::vector<analysis::OptionDescriptor<Request>>& table, const std::string& section,
                  const std::set<std::string>& extra = {})
{
    std::set<std::string> known = extra;
    for (const auto& d : table)
        known.insert(analysis::option_name(d.name, analysis::Spelling::keyword));
    r.check_keys(t, known, section);
    for (const auto& d : table) {
        const std::string key = analysis::option_name(d.name, analysis::Spelling::keyword);
        std::visit(
            [&](auto field) {
                auto& value = request.*field;
                using T = std::remove_reference_t<decltype(value)>;
                if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>) {
                    if (const auto v = r.boolean(t, key.c_str()))
                        value = *v;
                } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::optional<std::int64_t>>) {
                    if (const auto v = r.integer(t, key.c_str()))
                        value = *v;
                } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
                    if (const auto v = r.number(t, key.c_str()))
                        value = *v;
                } else {
                    if (const auto v = d.list ? r.list(t, key.c_str()) : r.str(t, key.c_str()))
                        value = *v;
                }
            },
            d.field);
    }
}

// A FILE[:NAME] reference of the job (mixing, gates): a relative file that exists beside the job is the job's.
std::string relative_to_job(const std::string& ref, const std::string& base)
{
    if (ref.empty() || fs::path(ref).is_absolute())
        return ref;
    const std::string file_part = ref.substr(0, ref.find(':'));
    std::error_code ec;   // a name the system refuses (too long ...) stays as given: reading it says why
    return fs::exists(fs::path(base) / file_part, ec) ? (fs::path(base) / ref).string() : ref;
}

MechanismArgs read_attention(const toml::table& root, const JobReader& r, const std::string& base)
{
    MechanismArgs mech;
    const toml::table* t = r.table(root, "attention");
    if (!t)
        return mech;
    read_request<analysis::MechanismRequest>(*t, r, mech, analysis::mechanism_options(), "[attention]");
    if (mech.seed < 0)
        r.fail(t->get("seed"), "[attention] 'seed' must be non-negative");
    if ((mech.blocks ? 1 : 0) + (mech.chunk ? 1 : 0) + (t->get("grid") ? 1 : 0) > 1)
        r.fail(t->get("blocks") ? t->get("blocks") : t->get("chunk"), "give only one of blocks, chunk, grid");
    if (!attention::is_mixing_preset(mech.mixing))
        mech.mixing = relative_to_job(mech.mixing, base);
    mech.gates = relative_to_job(mech.gates, base);
    return mech;
}

// [metrics].
analysis::MetricOptions read_metrics(const toml::table& root, const JobReader& r)
{
    MetricArgs met;
    if (const toml::table* t = r.table(root, "metrics"))
        read_request<analysis::MetricRequest>(*t, r, met, analysis::metric_options(), "[metrics]");
    return met.resolve();
}

// The descriptors of a [[sweep]] table: sweep_options() but synthetic data's (synth, d, seeds, n).
const std::vector<analysis::OptionDescriptor<analysis::SweepRequest>>& batch_sweep_options()
{
    static const auto table = [] {
        std::vector<analysis::OptionDescriptor<analysis::SweepRequest>> out;
        for (const auto& d : analysis::sweep_options())
            if (d.name != "synth" && d.name != "d" && d.name != "seeds" && d.name != "n")
                out.push_back(d);
        return out;
    }();
    return table;
}

// [[sweep]] tables: each a sweep over every file of the job, with the job's options.
void read_sweeps(const toml::table& root, const JobReader& r, analysis::BatchPlan& plan)
{
    const toml::node* sweeps = root.get("sweep");
    if (!sweeps)
        return;
    if (!sweeps->is_array_of_tables())
        r.fail(sweeps, "'sweep' must be an array of tables: [[sweep]]");
    std::set<std::string> names;
    for (const auto& node : *sweeps->as_array()) {
        const toml::table& t = *node.as_table();
        // The sweep's own options, keys and types from their descriptors (analysis/sweep_request.h); a batch
        // sweep runs over the job's files, so the synthetic-data options are not among them.
        analysis::SweepRequest req;
        read_request<analysis::SweepRequest>(t, r, req, batch_sweep_options(), "[[sweep]]", {"name"});
        analysis::BatchSweep sw;
        sw.name = r.str(t, "name").value_or("");
        // The name becomes file names (sweeps/NAME.csv, figures/NAME_*.svg): one plain, visible name.
        if (sw.name.empty() || sw.name.find_first_of(std::string("/\0", 2)) != std::string::npos || sw.name.front() == '.' ||
            !names.insert(sw.name).second)
            r.fail(&node, "every [[sweep]] needs a unique 'name' without '/' that does not start with '.'");
        const std::string& vary = req.vary;
        if (vary.size() < 3 || (vary[0] != 'n' && vary[0] != 'm') || vary[1] != '=')
            r.fail(&node, "[[sweep]] " + sw.name + ": 'vary' must be \"n=LIST\" or \"m=LIST\"");
        sw.spec.vary = vary[0];
        sw.spec.values = analysis::parse_sizes(vary.substr(2), "vary");
        sw.spec.subsample = analysis::parse_subsample(req.subsample);
        sw.spec.draws = req.draws;
        if (req.subsample_seed < 0)
            r.fail(t.get("subsample_seed"), "[[sweep]] 'subsample_seed' must be non-negative");
        sw.spec.seed = static_cast<std::uint64_t>(req.subsample_seed);
        sw.spec.heads = analysis::AxisChoice::parse(req.heads, "heads");
        sw.spec.layers = analysis::AxisChoice::parse(req.layers, "layers");
        // A [[sweep]] without its own `layers` sweeps the job's layers (a job of per-layer datasets with
        // layers = "all" once swept layer 0 alone, silently).
        if (req.layers.empty() && plan.layers.kind != analysis::AxisChoice::Kind::selection)
            sw.spec.layers = plan.layers;
        sw.spec.mechanisms = plan.mechanisms;
        sw.spec.options = plan.options;
        sw.spec.given = plan.given;
        sw.spec.metrics = plan.metrics;
        sw.spec.memory_limit = plan.memory_limit;
        analysis::validate_sweep_counts(sw.spec, {"[[sweep]] " + sw.name + ": draws", "seeds", "[[sweep]] " + sw.name + ": vary", "n"});
        plan.sweeps.push_back(std::move(sw));
    }
}

// One [[figure]] table.
BatchFigure read_figure(const toml::node& node, const JobReader& r, const analysis::BatchPlan& plan)
{
    const toml::table& t = *node.as_table();
    r.check_keys(t, {"view", "format", "sweep", "heads", "metric", "log", "colormap", "query", "width", "height", "dpi",
                     "font_scale"},
                 "[[figure]]");
    BatchFigure f;
    f.view = r.str(t, "view").value_or("");
    if (!is_explore_view(f.view) && !is_sweep_view(f.view))
        r.fail(&node, "[[figure]] 'view' must be one of " + figure_view_names());
    if (f.view == "heads")   // a batch figure is one unit's (one head): the page of every head is not
        r.fail(&node, "[[figure]] view = \"heads\" draws every head of a layer, not one unit: use attnscope figure --view heads");
    if (f.view == "depth")   // every layer of a file, not one unit
        r.fail(&node, "[[figure]] view = \"depth\" multiplies every layer of a file, not one unit: use [depth] in the job "
                      "(depth/<file>.json and .csv) or attnscope figure --view depth");
    f.format = r.str(t, "format").value_or("png");
    if (f.format != "png" && f.format != "pdf" && f.format != "svg")
        r.fail(t.get("format"), "[[figure]] 'format' must be png, pdf or svg");
    f.sweep = r.str(t, "sweep");
    if (f.view == "curves") {
        const bool known = f.sweep && std::any_of(plan.sweeps.begin(), plan.sweeps.end(),
                                                  [&](const analysis::BatchSweep& sw) { return sw.name == *f.sweep; });
        if (!known)
            r.fail(&node, "[[figure]] view = \"curves\" needs 'sweep' naming one of the job's [[sweep]] tables");
    } else if (f.sweep) {
        r.fail(t.get("sweep"), "[[figure]] 'sweep' applies to view = \"curves\" only");
    }
    if (auto heads = r.list(t, "heads"))
        f.heads = analysis::parse_indices(*heads, "heads");
    f.look.metric = r.str(t, "metric");
    check_figure_metric(f.look.metric);
    f.look.log = r.boolean(t, "log").value_or(false);
    f.look.colormap = r.str(t, "colormap");
    // Whole numbers read as 64 bits and checked in range before they are narrowed (width = 4294967312 was
    // cast to int: 16 pixels).
    if (auto q = r.integer(t, "query")) {
        if (*q < 0 || *q > INT_MAX)
            r.fail(t.get("query"), "[[figure]] 'query' must be a token index 0.." + std::to_string(INT_MAX));
        f.look.query = static_cast<int>(*q);
    }
    for (const char* key : {"width", "height"})
        if (const auto v = r.integer(t, key); v && *v != 0 && (*v < 16 || *v > 20000))
            r.fail(t.get(key), std::string("[[figure]] '") + key + "' must be 0 (the view's own size) or 16..20000 logical pixels");
    f.size.width = static_cast<int>(r.integer(t, "width").value_or(0));
    f.size.height = static_cast<int>(r.integer(t, "height").value_or(0));
    f.size.dpi = r.number(t, "dpi").value_or(150.0);
    f.size.font_scale = r.number(t, "font_scale").value_or(1.0);
    if (!(f.size.dpi >= 24 && f.size.dpi <= 2400) || !(f.size.font_scale > 0.1 && f.size.font_scale <= 10))
        r.fail(&node, "[[figure]] 'dpi' must lie in 24..2400 and 'font_scale' in (0.1, 10]");
    return f;
}

}  // namespace

BatchJob parse_batch_job(const std::string& path)
{
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        std::string why = path + ": no such job file";
        if (ec && ec != std::errc::no_such_file_or_directory)
            why.append(" (").append(ec.message()).append(")");
        throw InputError(why);
    }
    toml::table root;
    try {
        root = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        throw InputError(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
    }
    const JobReader r(path);
    // A NUL character in any key or string (TOML's "\u0000") would cut a path or a name where the system reads
    // it as a C string: refused wherever it is.
    r.refuse_nul(root);
    r.check_keys(root, {"inputs", "q", "k", "layout", "at", "heads", "layers", "prefix_tokens", "mechanisms", "max_memory",
                        "attention", "metrics", "sweep", "figure", "depth"},
                 "the job");
    const std::string base = fs::path(path).parent_path().string();

    BatchJob job;
    analysis::BatchPlan& plan = job.plan;
    plan.job_path = path;
    plan.files = read_inputs(root, r, base);
    SelectionArgs sel;
    read_selection(root, r, plan, sel);
    const MechanismArgs mech = read_attention(root, r, base);
    plan.options = mech.resolve();
    plan.given = explicit_choices(sel, mech);
    plan.metrics = read_metrics(root, r);
    read_sweeps(root, r, plan);
    if (const toml::table* t = r.table(root, "depth")) {
        // [depth]: `attnscope depth` on every file (docs/batch.md): alpha, and one head or the mean over heads.
        r.check_keys(*t, {"alpha", "head"}, "[depth]");
        analysis::BatchDepth d;
        d.alpha = r.number(*t, "alpha").value_or(0.5);
        if (!(d.alpha >= 0.0 && d.alpha <= 1.0))
            r.fail(t->get("alpha"), "[depth] 'alpha' must lie in [0, 1]");
        if (const auto h = r.integer(*t, "head")) {
            if (*h < 0 || *h > (std::int64_t{1} << 31))
                r.fail(t->get("head"), "[depth] 'head' must be a head index (0 or more)");
            d.head = static_cast<Eigen::Index>(*h);
        }
        plan.depth = d;
    }
    if (const toml::node* figures = root.get("figure")) {
        if (!figures->is_array_of_tables())
            r.fail(figures, "'figure' must be an array of tables: [[figure]]");
        for (const auto& node : *figures->as_array())
            job.figures.push_back(read_figure(node, r, plan));
    }
    return job;
}

}  // namespace attnscope::app
