#include "sweep_options.h"

#include <cstdio>
#include <stdexcept>

#include <unistd.h>

#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "cli_common.h"
#include "io/tensor_file.h"
#include "util/names.h"

namespace attnscope::app {

void SweepOptions::add_to(CLI::App& cmd, bool vary_required)
{
    add_tensor_option(cmd, "--q", q, "Queries FILE[:NAME] (repeat with --k for several inputs)")->take_all()->allow_extra_args(false);
    add_tensor_option(cmd, "--k", k, "Keys FILE[:NAME]")->take_all()->allow_extra_args(false);
    add_request_options<analysis::SweepRequest>(cmd, *this, analysis::sweep_options(), "");
    if (vary_required)
        cmd.get_option("--vary")->required();
    cmd.add_option("--mechanism", mechanisms, "Comma list of " + joined(attention::mechanism_names()) + " (default " + attention::default_mechanism_text() + ")");
    selection.add_to(cmd);
    mechanism.add_to(cmd);
    metrics.add_to(cmd);
    memory.add_to(cmd);
}

analysis::SweepSpec SweepOptions::resolve() const
{
    const analysis::SweepRequests requests{q, k, mechanisms, *this, {selection, mechanism, metrics, memory}};
    analysis::SweepSpec spec = analysis::resolve_sweep(requests, analysis::Spelling::flag);
    memory.resolve();   // the thread count, with its notes
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
