#pragma once
// Fixtures of the core/io tests: make_io_fixtures.py (NumPy / h5py) writes them once into the build
// tree's tests/work/io_fixtures; CTest runs every test in its own process (possibly in parallel), so
// generation is guarded by a file lock and redone only when the script changes.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace attnscope::test::io {

// Folder holding the fixtures (generated on first use).
const std::string& fixtures_dir();
// fixtures_dir() + "/" + relative
std::string fixture(const std::string& relative);
// manifest.json
const nlohmann::json& manifest();

// A raw little-endian float64 file written by the script.
std::vector<double> read_f8(const std::string& relative);

// Same value, NaN equal to NaN, +0 distinct from -0.
bool same_value(double a, double b);
// Index of the first element that differs (same_value), or -1; sizes must match.
std::ptrdiff_t first_difference(const std::vector<double>& a, const std::vector<double>& b);

// Runs fn, requires it to throw E, and requires every string of `parts` in the message.
// Returns the message (empty when the expectation failed).
template <typename E>
std::string expect_throw_with(const std::function<void()>& fn, std::initializer_list<std::string> parts)
{
    try {
        fn();
    } catch (const E& e) {
        const std::string msg = e.what();
        for (const auto& p : parts)
            EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\": " << msg;
        return msg;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type, message: " << e.what();
        return {};
    }
    ADD_FAILURE() << "no exception thrown";
    return {};
}

}  // namespace attnscope::test::io
