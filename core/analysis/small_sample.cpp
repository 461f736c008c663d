#include "analysis/small_sample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace attnscope::analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_fraction(double x, double a, double b)
{
    constexpr double tiny = 1e-300, eps = 1e-16;
    const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (std::fabs(d) < tiny)
        d = tiny;
    d = 1.0 / d;
    double h = d;
    // One term of the fraction: the factor it multiplies h by.
    const auto step = [&](double aa) {
        d = 1.0 + aa * d;
        if (std::fabs(d) < tiny)
            d = tiny;
        c = 1.0 + aa / c;
        if (std::fabs(c) < tiny)
            c = tiny;
        d = 1.0 / d;
        return d * c;
    };
    for (int m = 1; m <= 10000; ++m) {
        const double m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        const double del = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        h *= del;
        if (std::fabs(del - 1.0) < eps)
            break;
    }
    return h;
}

int sign_of(double v) { return (v > 0) - (v < 0); }

}  // namespace

double mean_of(const std::vector<double>& x)
{
    double total = 0.0;
    for (const double v : x)
        total += v;
    return total / static_cast<double>(x.size());
}

std::optional<double> sample_std(const std::vector<double>& x)
{
    if (x.size() < 2)
        return std::nullopt;
    const double mu = mean_of(x);
    double total = 0.0;
    for (const double v : x)
        total += (v - mu) * (v - mu);
    return std::sqrt(total / static_cast<double>(x.size() - 1));
}

namespace {

// I_x(a, b) with y = 1 - x given apart: next to x = 1 the caller knows y to full precision where 1 - x would
// keep only its first digits (Student's tail at t = 2.5e-7: x = 1 - 6e-14 / df).
double incomplete_beta_xy(double x, double y, double a, double b)
{
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1) || !(y >= 0) || !(y <= 1))
        return kNaN;
    if (x == 0 || y == 0)
        return x == 0 ? 0.0 : 1.0;
    const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log(y);
    const double front = std::exp(log_front);
    if (x < (a + 1.0) / (a + b + 2.0))
        return front * beta_fraction(x, a, b) / a;
    return 1.0 - front * beta_fraction(y, b, a) / b;
}

}  // namespace

double incomplete_beta(double x, double a, double b) { return incomplete_beta_xy(x, 1.0 - x, a, b); }

double student_t_sf(double t, double df)
{
    if (std::isnan(t) || !(df > 0))
        return kNaN;
    if (std::isinf(t))
        return t > 0 ? 0.0 : 1.0;
    // P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2), accurate relative to itself however small (its
    // complement form 1 - I_{t^2 / (df + t^2)}(1/2, df/2) lost the tail of t = 12.7 at df = 1000 to 0).
    const double t2 = t * t;
    const double tail = incomplete_beta_xy(df / (df + t2), t2 / (df + t2), 0.5 * df, 0.5);
    return t > 0 ? 0.5 * tail : 1.0 - 0.5 * tail;
}

double student_t_quantile(double q, double df)
{
    if (!(q > 0) || !(q < 1) || !(df > 0))
        return kNaN;
    if (q == 0.5)
        return 0.0;
    if (q < 0.5)
        return -student_t_quantile(1.0 - q, df);
    // sf(t) = 1 - q, decreasing in t: bracket, then bisect to the last bit.
    const double target = 1.0 - q;
    double lo = 0.0, hi = 1.0;
    while (student_t_sf(hi, df) > target && hi < 1e300)
        hi *= 2.0;
    for (int i = 0; i < 2000 && hi - lo > 4 * std::numeric_limits<double>::epsilon() * hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        (student_t_sf(mid, df) > target ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

std::pair<double, double> t_interval(const std::vector<double>& means, double level)
{
    if (means.size() < 2)
        throw std::invalid_argument("a t interval needs at least two cluster means");
    const double g = static_cast<double>(means.size());
    const double m = mean_of(means);
    const double half = student_t_quantile(0.5 * (1.0 + level), g - 1.0) * *sample_std(means) / std::sqrt(g);
    return {m - half, m + half};
}

double t_test_p(const std::vector<double>& means)
{
    if (means.size() < 2)
        return kNaN;
    const double g = static_cast<double>(means.size());
    const double m = mean_of(means);
    const double s = *sample_std(means);
    if (s == 0)
        return m == 0 ? 1.0 : 0.0;
    return std::min(1.0, 2.0 * student_t_sf(std::fabs(m) / (s / std::sqrt(g)), g - 1.0));
}

std::size_t agree_count(const std::vector<double>& means, double overall)
{
    const int s = sign_of(overall);
    return static_cast<std::size_t>(std::count_if(means.begin(), means.end(), [s](double v) { return sign_of(v) == s; }));
}

std::vector<double> holm_adjust(const std::vector<double>& p)
{
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < p.size(); ++i)
        if (!std::isnan(p[i]))
            order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&p](std::size_t a, std::size_t b) { return p[a] < p[b]; });
    std::vector<double> out(p.size(), kNaN);
    const double m = static_cast<double>(order.size());
    double running = 0.0;
    for (std::size_t j = 0; j < order.size(); ++j) {
        running = std::max(running, std::min(1.0, (m - static_cast<double>(j)) * p[order[j]]));
        out[order[j]] = running;
    }
    return out;
}

}  // namespace attnscope::analysis
