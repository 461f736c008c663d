// The desktop app reads a file's attributes by the core's rule, as the command line does
// (analysis::resolve_file_defaults, docs/cli.md): the bundled character LM is analysed causally, and an
// image file opened next is not (nothing of the previous file's options stays).
#include <QSignalSpy>

#include <gtest/gtest.h>

#include "analysis/file_defaults.h"
#include "analysis/measure.h"
#include "data_browser.h"
#include "mechanism_panel.h"
#include "selection_panel.h"
#include "widget_test_support.h"

using namespace attnscope;
using widgets::TensorRole;

namespace {

class WindowFileDefaults : public test::MainWindowTest {};

// The parameters the command line records for every mechanism of the window's queries: the core's rule
// applied to the file, nothing given explicitly.
void expectCommandLineParams(const widgets::MainWindow& w)
{
    const auto q = w.dataBrowser()->assigned(TensorRole::queries);
    ASSERT_TRUE(q);
    analysis::AnalysisSetup setup;
    setup.selection = w.selectionPanel()->selection();
    setup.selection.prefix_tokens = 0;
    analysis::resolve_file_defaults(io::parse_tensor_ref(q->ref().toStdString()), setup);
    const auto result = w.result();
    ASSERT_TRUE(result);
    for (const auto& o : result->outcomes) {
        ASSERT_TRUE(o.error.empty()) << o.error;
        EXPECT_EQ(o.result.params, analysis::mechanism_params(o.result.mechanism, analysis::options_for(o.result.mechanism, setup.options),
                                                              result->n, result->d))
            << attention::to_string(o.result.mechanism);
    }
}

}  // namespace

TEST_F(WindowFileDefaults, CausalLanguageModelIsAnalysedCausally)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    EXPECT_TRUE(w.mechanismPanel()->options().causal);
    const auto result = w.result();
    ASSERT_TRUE(result);
    ASSERT_EQ(result->outcomes.size(), 3u);
    for (const auto& o : result->outcomes)
        EXPECT_EQ(o.result.params["causal"], true) << attention::to_string(o.result.mechanism);
    expectCommandLineParams(w);
}

TEST_F(WindowFileDefaults, NextFileStartsFromItsOwnAttributes)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    ASSERT_TRUE(w.mechanismPanel()->options().causal);
    w.dataBrowser()->closeAll();
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("vit_digits.h5"))}));
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    EXPECT_EQ(w.selectionPanel()->selection().prefix_tokens, 1);   // the file's prefix_tokens
    const auto result = w.result();
    ASSERT_TRUE(result);
    EXPECT_EQ(result->n, 64);
    ASSERT_TRUE(result->blocks);
    EXPECT_EQ(result->blocks->block_grid, (std::vector<Eigen::Index>{4, 4}));   // the file's 8x8 grid, blocks 4x4
    expectCommandLineParams(w);
}

// An attribute that cannot be used is said in the window (naming it), and stays said after the computation;
// the options start from the program's defaults (the file's causal attribute is not half-applied).
TEST_F(WindowFileDefaults, UnusableAttributeIsReportedNotIgnored)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::windowFixture("bad_attrs.h5")}));
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("prefix_tokens"))) << w.messageText().toStdString();
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("bad_attrs.h5"))) << w.messageText().toStdString();
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    EXPECT_EQ(w.selectionPanel()->selection().prefix_tokens, 0);
    ASSERT_TRUE(w.result());
    EXPECT_EQ(w.result()->n, 16);
    // Another file clears it.
    w.dataBrowser()->closeAll();
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    EXPECT_FALSE(w.messageText().contains(QStringLiteral("prefix_tokens"))) << w.messageText().toStdString();
}
