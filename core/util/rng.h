#pragma once
// A tiny, fully specified random generator so that every random draw AttnScope makes (FAVOR+
// features, synthetic data) can be reproduced in a few lines of NumPy:
//
//   state += 0x9E3779B97F4A7C15; z = state;
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^= z >> 31
//   (splitmix64, all arithmetic mod 2^64; the initial state is the seed)
//   uniform u = ((z >> 11) + 0.5) * 2^-53, in (0, 1)
//   normal: two uniforms u1, u2 -> sqrt(-2 ln u1) * cos(2 pi u2)   (one normal per two uniforms)
//
// docs/maths.md gives the same recipe; tests/reference/attnref.py implements it independently.
#include <cmath>
#include <cstdint>

namespace attnscope {

class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : m_state(seed) {}

    std::uint64_t next_u64()
    {
        m_state += 0x9E3779B97F4A7C15ULL;
        std::uint64_t z = m_state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }

    // Uniform in the open interval (0, 1).
    double uniform() { return (static_cast<double>(next_u64() >> 11) + 0.5) * 0x1.0p-53; }

    // Standard normal by Box-Muller (only the cosine branch, so draws are independent of parity).
    double normal()
    {
        const double u1 = uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }

private:
    std::uint64_t m_state;
};

}  // namespace attnscope
