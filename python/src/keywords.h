#pragma once
// Keyword arguments set onto the core's typed requests (analysis/requests.h) by the requests' descriptors, with
// no command-line text in between (issue 33): a bool is a switch, an int an integer option, a float a number, a
// str (or a path) a text, a list or tuple a comma list where the option takes one, an array a lent tensor
// (mixing, gates). The requests then validate themselves and name options as keywords (Spelling::keyword).
#include <functional>
#include <string>

#include "analysis/aggregate_request.h"
#include "analysis/depth_request.h"
#include "analysis/requests.h"
#include "analysis/sweep_request.h"
#include "bridge.h"

namespace attnscope::python {

// Every request a call that reads tensors may take; `groups` says which of them a call takes.
struct Requests : analysis::AnalysisRequests {   // selection, mechanism, metrics, memory
    analysis::SweepRequest sweep;
    analysis::AggregateRequest aggregate;
    analysis::DepthSettings depth;
    bool allow_virtual = false;   // the command line's --allow-virtual (a reading setting of this call)
};

enum RequestGroup : unsigned { selection_group = 1, mechanism_group = 2, metrics_group = 4, memory_group = 8, sweep_group = 16, aggregate_group = 32, depth_group = 64 };

// Sets `requests` from the (keyword, value) pairs of `options` (None values were left out by the Python layer)
// for the groups in `groups`; a keyword outside them goes to `other`, which returns false for one it does not
// take either (then py::type_error, as Python says it). Sets call.read (allow_virtual) and call.sets_threads.
// Wrong types raise py::type_error naming the keyword, values no option can hold (an integer past 64 bits, a
// NaN, a NUL character) py::value_error.
void bind_keywords(CallArgs& call, Requests& requests, unsigned groups, const py::list& options,
                   const std::function<bool(const std::string&, const py::handle&)>& other);

// A text option's value: a str or path, an int, or (`list_ok`) a list or tuple of them joined by commas; for `at`
// a dict of axis letters and indices ("h=2,b=all"). py::type_error naming `key` for any other type.
std::string keyword_text(const std::string& key, const py::handle& value, bool list_ok);

}  // namespace attnscope::python
