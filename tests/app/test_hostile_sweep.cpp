// The hostile sweep (docs/security.md, "Fuzzing and the hostile sweep"): tests/app/hostile_sweep.py runs
// several hundred scripted hostile cases across every subcommand and the desktop app's scripted runs,
// each in a sandbox with a timeout and an address-space limit, and fails naming every case that crashed,
// hung, allocated without bound, touched a file outside its named outputs, leaked a decoy's secret, or
// exited 0 without its output.
#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

TEST(HostileSweep, EveryCaseHolds)
{
    attnscope::test::expect_script_passes("app/hostile_sweep.py", "hostile_sweep");
}
