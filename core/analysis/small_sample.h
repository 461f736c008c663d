#pragma once
// Statistics over few clusters (attention.md 2.2, "Statistics over few clusters"; docs/maths.md 5): with G
// clusters (seeds, models) a percentile bootstrap of the G cluster means has few distinct resamples (10 for
// G = 3) and its interval reads "all G agree" as certainty. Below k_few_clusters the interval of a mean or a
// paired difference is the Student t interval over the G cluster means (G - 1 degrees of freedom), reported
// with how many of the G means share the overall sign (`agree`), a cluster-level t test, and Holm's
// adjustment across one table. Student's t distribution is computed here from the regularised incomplete beta
// function (continued fraction, Lentz's method); tests compare it with mpmath to 40 digits.
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace attnscope::analysis {

// Fewer clusters than this: t intervals over the cluster means instead of the bootstrap (attention.md 2.2).
inline constexpr std::size_t k_few_clusters = 10;
// Fewer clusters than this: no two-sided sign test can reach p < 0.05 (2 / 2^4 = 0.125 at G = 4), a sentence
// every table prints.
inline constexpr std::size_t k_sign_test_min_clusters = 6;

// The plain left-to-right sum / n (the order fixes the last bits; tests/reference/attnref.py sums alike), and the
// sample standard deviation (n - 1; none below two values). Every statistic over units uses these.
double mean_of(const std::vector<double>& x);
std::optional<double> sample_std(const std::vector<double>& x);

// The regularised incomplete beta function I_x(a, b), a, b > 0, x in [0, 1].
double incomplete_beta(double x, double a, double b);
// P(T > t) for Student's t with df > 0 degrees of freedom.
double student_t_sf(double t, double df);
// The q-quantile of Student's t (0 < q < 1), to about 1e-13 relative.
double student_t_quantile(double q, double df);

// The t interval of the mean of `means` (G >= 2 values) at `level`: mean +- t_{(1+level)/2, G-1} s / sqrt(G),
// s the sample std. A zero spread gives the mean twice. Throws std::invalid_argument below two values.
std::pair<double, double> t_interval(const std::vector<double>& means, double level = 0.95);
// The two-sided one-sample t test of mean 0 over `means` (G >= 2): p = 2 P(T_{G-1} > |mean| / (s / sqrt(G))).
// A zero spread gives 1 when the mean is 0 and 0 otherwise. NaN below two values.
double t_test_p(const std::vector<double>& means);
// How many of `means` have the sign of `overall` (-1, 0 or +1 each).
std::size_t agree_count(const std::vector<double>& means, double overall);
// Holm's step-down adjustment of p-values (NaN entries are left out of the count and stay NaN): sorted
// ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) p_(j)); returned in the input's order.
std::vector<double> holm_adjust(const std::vector<double>& p);

}  // namespace attnscope::analysis
