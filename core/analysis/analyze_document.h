#pragma once
// The analyze JSON of docs/cli.md ("analyze JSON") for one request: the inputs read, every mechanism
// measured, the document assembled. The command line (`attnscope analyze`) and the Python module
// (`attnscope.analyze`, python/) both call it, so the two documents are one code path's output.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/file_defaults.h"
#include "analysis/job.h"
#include "analysis/measure.h"
#include "attention/options.h"

namespace attnscope::analysis {

struct AnalyzeRequest {
    io::TensorRef q, k;                        // a file's tensor or an array in memory
    std::optional<io::TensorRef> v;
    AnalysisSetup setup;                       // selection and options after the file's attributes
    nlohmann::ordered_json from_file;          // what the file's attributes set (empty: nothing)
    std::vector<attention::Mechanism> mechanisms;
    MetricOptions metrics;
    std::uint64_t memory_limit = 0;
};

// The single-unit document {attnscope_version, input, results, kernels}. With `ctx`, progress and
// cancellation as analyze() (the numbers are the same). Throws like load_inputs() and analyze().
nlohmann::ordered_json analyze_document(const AnalyzeRequest& request, const JobContext* ctx = nullptr);

// A selection with index axes given as `all` (`--at b=all`, analysis/plan.h): every index is its own unit.
// The document holds {attnscope_version, units: [{unit, at, input, results}], aggregate, kernels}; `stats`
// and `options` are the statistics over the units it holds and how they were drawn.
struct UnitsDocument {
    nlohmann::ordered_json doc;
    Aggregate stats;
    AggregateOptions options;
    std::size_t units = 0;
};
UnitsDocument analyze_units_document(const AnalyzeRequest& request, const JobContext* ctx = nullptr);

// The N x N attention matrix of the one mechanism in request.mechanisms (`attnscope matrix`,
// `attnscope.matrix`), with its params and the "input" object. Throws InputError when the matrix would
// exceed the memory limit or has non-finite entries (operator's reason), std::invalid_argument when
// request.mechanisms does not hold exactly one (`mechanism_text` names what was asked).
struct DenseAttention {
    Eigen::MatrixXd matrix;
    nlohmann::ordered_json params;
    nlohmann::ordered_json input;
};
DenseAttention dense_attention(const AnalyzeRequest& request, const std::string& mechanism_text);

struct MetricEntry;
// `analyze --metric NAME[,...]` (attnscope.analyze(metric=...)): the metric table's entries those names give, in
// their order (none: every metric); an unknown, repeated or missing name throws std::invalid_argument naming
// `option` and the names there are.
std::vector<const MetricEntry*> chosen_metrics(const std::optional<std::string>& names, const std::string& option);
// Each result of an analyze document (or of a unit of one) keeps what names it (mechanism, params, method,
// warnings) and the chosen metrics, each a field under its flat key ("entropy_mean"); nothing when none is chosen.
void keep_metrics(nlohmann::ordered_json& doc, const std::vector<const MetricEntry*>& chosen);

}  // namespace attnscope::analysis
