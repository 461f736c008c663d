#pragma once
// The calls of the module (python/src/module.cpp): analyze, matrix and load hold the core's typed requests, set
// from keyword arguments (keywords.h). Each runs on the worker thread.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analyze_document.h"
#include "analysis/job.h"
#include "attention/mechanisms.h"
#include "keywords.h"

namespace attnscope::python {

// attnscope.analyze: `attnscope analyze` (the analyze JSON as text, indented as `--json` writes it), from the
// core's typed requests (keywords.h).
struct AnalyzeCall {
    io::TensorRef q, k;
    std::optional<io::TensorRef> v;
    std::string mechanisms = attention::default_mechanism_text();
    std::optional<std::string> metric;   // metric=: only these metrics (analyze --metric)
    bool no_baseline = false;            // no_baseline=True: analyze --no-baseline
    Requests requests;
    std::string run(const analysis::JobContext& ctx) const;
};

// attnscope.matrix: `attnscope matrix` without the file (the N x N matrix, its params and input).
struct MatrixCall {
    io::TensorRef q, k;
    std::string mechanism_text;
    Requests requests;
    analysis::DenseAttention run(const analysis::JobContext& ctx) const;
};

// attnscope.sweep: `attnscope sweep --json` (the sweep summary as text).
struct SweepCall {
    std::vector<io::TensorRef> q, k;
    std::string mechanisms;
    Requests requests;
    std::string run(const analysis::JobContext& ctx) const;
};

// attnscope.load: the N x d slice the command line reads for a reference under a selection, or `whole` the whole
// tensor in its own shape; both as float64, with the attributes a file's defaults come from.
struct LoadCall {
    io::TensorRef ref;   // a file's tensor (tensor_ref of the str argument)
    bool whole = false;
    Requests requests;
    struct Loaded {
        std::vector<std::int64_t> shape;
        std::vector<double> values;   // row-major
        nlohmann::json attributes = nlohmann::json::object();
        std::string origin;   // the file, absolute: what the attributes' references are relative to
    };
    Loaded run() const;
};

// attnscope.aggregate: `attnscope aggregate --json` (the statistics of a batch folder by group, as text).
struct AggregateCall {
    std::string dir;
    Requests requests;
    std::string run() const;
};

// attnscope.depth: `attnscope depth --json` (collapse with depth over one file's layers, as text).
struct DepthCall {
    std::string file;
    std::string mechanisms;
    Requests requests;
    std::string run(const analysis::JobContext& ctx) const;
};

// attnscope.info: the `info --json` document as text.
std::string info_text(const std::string& path);

}  // namespace attnscope::python
