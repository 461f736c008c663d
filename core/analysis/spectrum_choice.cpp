// The spectrum path of one operator and why (analysis/measure.h, choose_spectrum): each branch states its
// reason where it decides, in the words of the JSON's "method": {"why"} and the summary table.
#include <cstdio>
#include <optional>
#include <string>

#include "analysis/measure.h"
#include "metrics/structured.h"
#include "metrics/topk.h"
#include "util/error.h"

namespace attnscope::analysis {

namespace {

// "block Lanczos 50 passes x 2 N^2 (d + 2b) = 1.6e12 flops, the dense SVD (8/3) N^3 = 1.5e12 flops": the
// estimate of spectrum_cost_estimate in words.
std::string cost_words(const attention::AttentionOperator& op, Index k)
{
    const SpectrumCostEstimate c = spectrum_cost_estimate(op.rows(), score_width(op), k);
    char buf[200];
    std::snprintf(buf, sizeof buf, "block Lanczos %.0f passes x 2 N^2 (d + 2b) = %.1e flops (d=%lld, b=%lld), the dense SVD "
                  "(8/3) N^3 = %.1e flops", k_auto_top_k_passes, c.top_k_flops, static_cast<long long>(score_width(op)),
                  static_cast<long long>(metrics::top_k_default_block(k)), c.dense_flops);
    return buf;
}

// The words a spectrum choice is explained in (the JSON's "method": {"why"} and the summary table).
struct ChoiceWords {
    const attention::AttentionOperator& op;
    const MetricOptions& mo;
    Index n;
    std::string asked;    // "--method auto"
    std::string matrix;   // "the dense N x N SVD needs about ..."
    // The limit itself is left out: a batch divides it among its jobs, and a unit's record must not depend
    // on --jobs (docs/batch.md).
    std::string limit = "--max-memory";

    ChoiceWords(const attention::AttentionOperator& o, const MetricOptions& m)
        : op(o), mo(m), n(o.rows()), asked("--method " + std::string(to_string(m.method))),
          matrix("the dense " + std::to_string(n) + " x " + std::to_string(n) + " SVD needs about " +
                 human_bytes(dense_memory_bytes(n)))
    {
    }

    // After `asked`: ": <matrix>, over --max-memory;" when auto left the dense path for lack of memory.
    std::string over_limit() const { return ": " + matrix + ", over " + limit + ";"; }

    SpectrumChoice structured_by_request() const
    {
        return {SpectrumPath::structured, asked + ": exact from the low-rank factors (non-causal linear / MHLA)"};
    }
    SpectrumChoice structured_by_size(bool fits) const
    {
        return {SpectrumPath::structured, asked + ": exact from the low-rank factors, core " +
                                              std::to_string(metrics::structured_core_size(*op.factors())) +
                                              " < N=" + std::to_string(n) +
                                              (fits ? "" : " (and " + matrix + ", over " + limit + ")")};
    }
    SpectrumChoice randomized(const std::string& prefix) const
    {
        return {SpectrumPath::randomized,
                asked + prefix + " the rank at --rank-rtol bracketed by the randomized range finder (O(N basis) memory)" +
                    (mo.top_k ? " and the " + std::to_string(*mo.top_k) + " largest by block Lanczos" : "")};
    }
    SpectrumChoice top_k(const std::string& prefix) const
    {
        return {SpectrumPath::top_k,
                asked + prefix + " the " + std::to_string(*mo.top_k) + " largest singular values " +
                    (metrics::top_k_uses_dense(n, n, *mo.top_k)
                         ? "from the dense SVD (small N: cheaper than block Lanczos)"
                         : "by block Lanczos on the matrix-free operator (O(N k) memory)")};
    }
    // auto_prefers_top_k although the dense matrix fits.
    SpectrumChoice top_k_cheaper() const
    {
        const std::string k = std::to_string(*mo.top_k);
        return {SpectrumPath::top_k,
                asked + ": only the " + k + " largest singular values asked for, and block "
                "Lanczos is estimated cheaper than the dense SVD although that fits " + limit + " (" +
                    cost_words(op, *mo.top_k) + "); the " + k +
                    " largest by block Lanczos on the matrix-free operator (O(N k) memory); rank, effective and "
                    "stable rank need every singular value (leave out --top-k for them)"};
    }
    SpectrumChoice dense() const
    {
        if (mo.method == SpectrumMethod::dense)
            return {SpectrumPath::dense, asked};
        std::string why = asked + ": every singular value, exactly, from the dense matrix (" + matrix + ", within " +
                          limit + ")" + (op.factors() ? "; the structured core is not smaller than N" : "");
        if (mo.top_k && !op.factors()) {
            if (mo.rank_rtol)
                why += "; --rank-rtol asks for the exact rank, which needs every singular value";
            else if (metrics::top_k_uses_dense(n, n, *mo.top_k))
                why += "; --top-k " + std::to_string(*mo.top_k) + " would take the dense SVD too (small N or large k)";
            else
                why += "; estimated cheaper than the " + std::to_string(*mo.top_k) + " largest by block Lanczos (" +
                       cost_words(op, *mo.top_k) + ")";
        }
        return {SpectrumPath::dense, why};
    }
};

// --method streaming: never N x N.
SpectrumChoice choose_streaming(const ChoiceWords& w)
{
    if (w.op.factors())
        return w.structured_by_request();
    if (w.mo.rank_rtol)
        return w.randomized(":");
    if (!w.mo.top_k)   // nothing about the spectrum is computable without N x N: null, and measure() says why
        return {SpectrumPath::none, w.asked + ": no low-rank factors, and neither --top-k nor --rank-rtol"};
    return w.top_k(":");
}

// --method auto, before the dense path: nothing when the dense path is the one to take (if it fits).
std::optional<SpectrumChoice> choose_automatic(const ChoiceWords& w, bool fits)
{
    const attention::KernelFactors* factors = w.op.factors();
    const MetricOptions& mo = w.mo;
    // Structured is exact; it is taken when its core is smaller than N (an O((M r)^3) SVD instead of O(N^3)).
    if (factors && metrics::structured_core_size(*factors) < w.n)
        return w.structured_by_size(fits);
    // A few largest values asked for, and no exact rank: the cheaper of dense and block Lanczos
    // by the estimate of docs/cli.md (--method auto), even when the dense matrix fits.
    if (!factors && mo.top_k && !mo.rank_rtol && auto_prefers_top_k(w.n, score_width(w.op), *mo.top_k))
        return fits ? w.top_k_cheaper() : w.top_k(w.over_limit());
    if (!fits) {
        if (factors)
            return w.structured_by_size(fits);
        if (mo.rank_rtol)
            return w.randomized(w.over_limit());
        if (mo.top_k)
            return w.top_k(w.over_limit());
    }
    return std::nullopt;
}

}  // namespace

SpectrumChoice choose_spectrum(const attention::AttentionOperator& op, const MetricOptions& mo, std::uint64_t memory_limit)
{
    if (!mo.spectrum)
        return {SpectrumPath::none, "spectrum not asked for"};
    const Index n = op.rows();
    const std::string name = std::string(attention::to_string(op.mechanism())) +
                             (op.kernel_pieces() && op.kernel_pieces()->causal ? " (causal)" : "");
    const ChoiceWords words(op, mo);
    const std::uint64_t need = dense_memory_bytes(n);
    const bool fits = need <= memory_limit;
    switch (mo.method) {
    case SpectrumMethod::dense:
        break;
    case SpectrumMethod::structured:
        if (!op.factors())
            throw std::invalid_argument(name + " attention has no low-rank factors: the structured spectrum method "
                                               "applies to non-causal linear and MHLA only (use the automatic method)");
        return words.structured_by_request();
    case SpectrumMethod::streaming:
        return choose_streaming(words);
    case SpectrumMethod::automatic:
        if (std::optional<SpectrumChoice> choice = choose_automatic(words, fits))
            return std::move(*choice);
        break;
    }
    if (!fits)
        throw MemoryLimitError(name + ", N=" + std::to_string(n) + ": all singular values need the dense " +
                               std::to_string(n) + " x " + std::to_string(n) + " matrix, about " + human_bytes(need) +
                               ", over the memory limit of " + human_bytes(memory_limit) + ". What fits: the entropy "
                               "alone (streamed), the top-k largest singular values (matrix-free), and the structured "
                               "spectrum method for non-causal linear and MHLA");
    return words.dense();
}

}  // namespace attnscope::analysis
