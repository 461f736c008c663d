// What each function of the module runs on the worker thread: the same option groups and core calls as the
// subcommands (app/cmd_analyze.cpp, cmd_files.cpp, cmd_sweep.cpp), so the documents are the same.
#include "calls.h"

#include <filesystem>
#include <iostream>

#include "analysis/aggregate_request.h"
#include "analysis/analyze_document.h"
#include "analysis/depth_request.h"
#include "analysis/info_document.h"
#include "analysis/requests.h"
#include "analysis/sweep.h"
#include "analysis/sweep_request.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "io/selection.h"
#include "util/json_text.h"
#include "util/names.h"

namespace attnscope::python {

namespace {

// The memory limit of a call, with its thread count applied (the notes on standard error, as the command line
// writes them).
std::uint64_t memory_of(const analysis::MemoryRequest& memory)
{
    const std::uint64_t limit = analysis::memory_limit(memory, analysis::Spelling::keyword);
    std::vector<std::string> notes;
    analysis::apply_threads(memory, analysis::Spelling::keyword, notes);
    for (const std::string& note : notes)
        std::cerr << "note: " << note << "\n";
    return limit;
}

}  // namespace

std::string AnalyzeCall::run(const analysis::JobContext& ctx) const
{
    using analysis::Spelling;
    analysis::AnalyzeRequest r;
    r.mechanisms = analysis::parse_mechanisms(mechanisms, "mechanism");
    r.q = q;
    r.k = k;
    r.v = v;
    r.setup = analysis::resolve_setup(q, requests.selection, requests.mechanism, Spelling::keyword, &r.from_file);
    r.metrics = analysis::resolve(requests.metrics, Spelling::keyword);
    if (no_baseline)
        r.metrics.baseline = false;
    const auto chosen = analysis::chosen_metrics(metric, "metric");
    r.memory_limit = memory_of(requests.memory);
    io::set_read_limit_bytes(r.memory_limit);
    if (!r.setup.selection.all.empty()) {
        analysis::UnitsDocument units = analysis::analyze_units_document(r, &ctx);
        for (auto& unit : units.doc["units"])
            analysis::keep_metrics(unit, chosen);
        return json_text(units.doc, 2);
    }
    nlohmann::ordered_json doc = analysis::analyze_document(r, &ctx);
    analysis::keep_metrics(doc, chosen);
    return json_text(doc, 2);
}

analysis::DenseAttention MatrixCall::run(const analysis::JobContext& ctx) const
{
    using analysis::Spelling;
    analysis::AnalyzeRequest r;
    r.mechanisms = analysis::parse_mechanisms(mechanism_text, "mechanism");
    r.q = q;
    r.k = k;
    if (r.mechanisms.size() != 1)
        throw std::invalid_argument("matrix takes one mechanism (got " + mechanism_text + ")");
    r.setup = analysis::resolve_setup(q, requests.selection, requests.mechanism, Spelling::keyword, &r.from_file);
    r.memory_limit = memory_of(requests.memory);
    io::set_read_limit_bytes(r.memory_limit);
    ctx.progress(0.0, mechanism_text + ": attention matrix");
    return analysis::dense_attention(r, mechanism_text);
}

std::string SweepCall::run(const analysis::JobContext& ctx) const
{
    const analysis::SweepRequests r{q, k, mechanisms, requests.sweep, requests};
    analysis::SweepSpec spec = analysis::resolve_sweep(r, analysis::Spelling::keyword);
    memory_of(requests.memory);   // the thread count, with its notes
    const analysis::SweepPlan plan = analysis::plan_sweep(std::move(spec));
    const std::vector<analysis::SweepRecord> records = analysis::run_sweep(plan, ctx);
    return json_text(analysis::sweep_summary(plan.spec, records, plan.inputs), 2);
}

LoadCall::Loaded LoadCall::run() const
{
    const io::TensorRef& r = ref;
    const auto file = io::open_tensor_file(r.file);
    const io::TensorInfo& info = file->find(r.name);
    Loaded out;
    // The dataset's attributes win over the file's, as analysis::read_file_defaults reads them (the
    // dataset's first; the file's only for what the dataset does not say).
    out.attributes = file->file_attributes().is_object() ? file->file_attributes() : nlohmann::json::object();
    for (const auto& [key, value] : info.attributes.items())
        out.attributes[key] = value;
    // References in the attributes (a mixing matrix beside the file) resolve against this file, wherever the
    // working folder is when the Tensor is analysed: its folder resolved now, its own name kept (a symlink
    // named by the user stays the file whose folder counts, as on the command line).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path named(r.file);
    const fs::path folder = fs::weakly_canonical(fs::absolute(named.parent_path().empty() ? fs::path(".") : named.parent_path(), ec), ec);
    out.origin = ec ? r.file : (folder / named.filename()).string();
    if (whole) {
        out.shape = info.shape;
        out.values = file->read_all(info);
        return out;
    }
    const io::SelectedMatrix m =
        io::load_selected(*file, r.name, analysis::resolve(requests.selection, analysis::Spelling::keyword), ref.text);
    out.shape = {m.values.rows(), m.values.cols()};
    out.values.resize(static_cast<std::size_t>(m.values.size()));
    for (Eigen::Index t = 0; t < m.values.rows(); ++t)
        for (Eigen::Index j = 0; j < m.values.cols(); ++j)
            out.values[static_cast<std::size_t>(t * m.values.cols() + j)] = m.values(t, j);
    return out;
}

std::string AggregateCall::run() const
{
    const analysis::AggregateRun r =
        analysis::run_aggregate(dir, requests.aggregate, memory_of(requests.memory), analysis::Spelling::keyword);
    return json_text(analysis::aggregate_run_document(dir, r, requests.aggregate), 2);
}

std::string DepthCall::run(const analysis::JobContext& ctx) const
{
    const analysis::DepthRequests r{file, mechanisms, requests.depth, requests};
    const analysis::DepthRequest req = analysis::resolve_depth(r, analysis::Spelling::keyword);
    memory_of(requests.memory);   // the thread count, with its notes
    return json_text(analysis::depth_document(req, &ctx), 2);
}

std::string info_text(const std::string& path)
{
    return json_text(analysis::info_json(path, *io::open_tensor_file(path)), 2);
}

}  // namespace attnscope::python
