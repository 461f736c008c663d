// `attnscope figure` and `attnscope sweep --plot`: every view rendered headless (no display) to a
// non-blank PNG, a PDF and an SVG that parses as XML; from a session; errors exit 2 with one `error:`
// line and leave no file behind.
#include <QByteArray>
#include <QFile>
#include <QImage>
#include <QSet>
#include <QXmlStreamReader>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>

#include <unistd.h>

#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

using attnscope::test::CommandResult;
namespace fs = std::filesystem;

namespace {

// Without DISPLAY and QT_QPA_PLATFORM: figure must choose the offscreen platform itself.
CommandResult run_attnscope(const std::string& args) { return attnscope::test::run_attnscope(args, attnscope::test::kNoDisplay); }

struct Fixture {
    std::string dir, grid, lm;
};

// A 2-head 8x8-grid file and a 2-head 1-D file, written by attnscope synth (checked by check_synth.py elsewhere).
const Fixture& fixture()
{
    static const Fixture f = [] {
        Fixture x;
        // One folder per process: ctest -j runs these tests in parallel processes.
        x.dir = attnscope::test::fresh_work_dir("cli_figure_fixtures");
        x.grid = x.dir + "/grid.h5";
        x.lm = x.dir + "/lm.h5";
        const auto a = run_attnscope("synth --n 64 --d 8 --heads 2 --kind local2d --seed 1 --out " + x.grid);
        const auto b = run_attnscope("synth --n 96 --d 8 --heads 2 --kind local1d --seed 2 --out " + x.lm);
        if (a.status != 0 || b.status != 0)
            throw std::runtime_error("synth failed: " + a.err + b.err);
        return x;
    }();
    return f;
}

// The command line of each view on the fixtures (small and quick).
std::string view_args(const std::string& view)
{
    const Fixture& f = fixture();
    const std::string grid = " --q " + f.grid + ":/q --k " + f.grid + ":/k --grid 8,8 --block-grid 2,2";
    if (view == "curves")
        return "--view curves --synth local1d --d 8 --seeds 2 --vary n=32,48,64 --blocks 4";
    if (view == "overview")
        return "--view overview --q " + f.lm + ":/q --k " + f.lm + ":/k --blocks 4";
    if (view == "query")
        return "--view query" + grid + " --query 27";
    if (view == "maps")
        return "--view maps" + grid + " --colormap magma --log";
    return "--view " + view + grid;
}

const char* kViews[] = {"maps", "query", "spectrum", "entropy", "mixing", "metrics", "curves", "overview"};

void expect_png(const std::string& path, int min_colours = 12)
{
    QImage image;
    ASSERT_TRUE(image.load(QString::fromStdString(path))) << path;
    EXPECT_GT(image.width(), 100);
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 2)
        for (int x = 0; x < image.width(); x += 2)
            colours.insert(image.pixel(x, y));
    EXPECT_GE(colours.size(), min_colours) << path << " looks blank";
}

void expect_pdf(const std::string& path)
{
    const std::string text = attnscope::test::read_text(path);
    ASSERT_GT(text.size(), 500u) << path;
    EXPECT_EQ(text.substr(0, 4), "%PDF") << path;
    EXPECT_NE(text.find("%%EOF"), std::string::npos) << path;
}

void expect_svg(const std::string& path)
{
    QFile file(QString::fromStdString(path));
    ASSERT_TRUE(file.open(QIODevice::ReadOnly)) << path;
    QXmlStreamReader xml(&file);
    bool svg = false;
    int elements = 0;
    while (!xml.atEnd()) {
        if (xml.readNext() == QXmlStreamReader::StartElement) {
            ++elements;
            if (xml.name() == QLatin1String("svg"))
                svg = true;
        }
    }
    EXPECT_FALSE(xml.hasError()) << path << ": " << xml.errorString().toStdString();
    EXPECT_TRUE(svg) << path;
    EXPECT_GT(elements, 20) << path;
}

// Exit 2, exactly one line on stderr, starting "error: " and containing `needle`; the folder stays empty.
void expect_refused(const CommandResult& r, const std::string& needle, const std::string& dir)
{
    EXPECT_EQ(r.status, 2) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " not in " << r.err;
    for (const auto& e : fs::directory_iterator(dir))
        ADD_FAILURE() << "left behind: " << e.path();
}

void write_file(const std::string& path, const std::string& text)
{
    std::ofstream(path) << text;
}

std::string session_json(const std::string& data, const std::string& view, const std::string& extra = "")
{
    return R"({"attnscope_session": 1, "files": [")" + data + R"("],
  "tensors": {"q": {"file": ")" + data + R"(", "name": "/q"}, "k": {"file": ")" + data + R"(", "name": "/k"}},
  "selection": {"layout": "", "at": {"h": 1}, "prefix_tokens": 0, "token_grid": [8, 8]},
  "mechanism": {"block_mode": "grid", "grid": "8x8", "block_grid": "2x2", "mixing": "", "normalize": "row"},
  "view": ")" + view + R"(", "query": 10,
  "views": {"maps": {"colormap": "cividis", "log": true}})" + extra + "}\n";
}

}  // namespace

TEST(CliFigure, EveryViewAsPngPdfSvg)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_figure_views");
    for (const char* view : kViews) {
        for (const char* ext : {"png", "pdf", "svg"}) {
            const std::string out = dir + "/" + view + "." + ext;
            const CommandResult r = run_attnscope("figure " + view_args(view) + " --width 640 --height 420 --dpi 96 --out " + out);
            ASSERT_EQ(r.status, 0) << view << "." << ext << ": " << r.err;
            EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
            if (std::string(ext) == "png")
                expect_png(out);
            else if (std::string(ext) == "pdf")
                expect_pdf(out);
            else
                expect_svg(out);
        }
    }
    // The PNG's pixel size follows --width/--height and --dpi.
    QImage image(QString::fromStdString(dir + "/maps.png"));
    EXPECT_EQ(image.width(), 640);
    EXPECT_EQ(image.height(), 420);
    const std::string hi = dir + "/spectrum_hi.png";
    ASSERT_EQ(run_attnscope("figure " + view_args("spectrum") + " --width 400 --height 300 --dpi 192 --out " + hi).status, 0);
    QImage big(QString::fromStdString(hi));
    EXPECT_EQ(big.width(), 800);
    EXPECT_EQ(big.height(), 600);
}

TEST(CliFigure, MetricAndViewStateChangeTheFigure)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_figure_metric");
    const std::string a = dir + "/rank.png", b = dir + "/entropy.png";
    ASSERT_EQ(run_attnscope("figure " + view_args("curves") + " --dpi 96 --out " + a).status, 0);
    const auto r = run_attnscope("figure " + view_args("curves") + " --metric entropy_mean --dpi 96 --out " + b);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(QImage(QString::fromStdString(a)), QImage(QString::fromStdString(b)));

    const std::string c = dir + "/cum.png", d = dir + "/plain.png";
    ASSERT_EQ(run_attnscope("figure " + view_args("spectrum") + " --dpi 96 --out " + d).status, 0);
    const auto s = run_attnscope("figure " + view_args("spectrum") + " --view-state '{\"cumulative\": true}' --dpi 96 --out " + c);
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_NE(QImage(QString::fromStdString(c)), QImage(QString::fromStdString(d)));
}

TEST(CliFigure, FromSession)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_figure_session");
    const std::string session = dir + "/s.attnscope";
    write_file(session, session_json(fixture().grid, "maps"));
    for (const char* view : {"maps", "query", "spectrum", "mixing"}) {
        const std::string out = dir + "/" + std::string(view) + ".png";
        const CommandResult r = run_attnscope("figure --session " + session + " --view " + view + " --dpi 96 --out " + out);
        ASSERT_EQ(r.status, 0) << view << ": " << r.err;
        expect_png(out);
    }
    // The session's maps state (cividis, log) is what the figure shows: it differs from the default look.
    const std::string plain = dir + "/plain.png";
    const std::string grid = " --q " + fixture().grid + ":/q --k " + fixture().grid + ":/k --grid 8,8 --block-grid 2,2";
    ASSERT_EQ(run_attnscope("figure --view maps" + grid + " --head 1 --dpi 96 --out " + plain).status, 0);
    EXPECT_NE(QImage(QString::fromStdString(plain)), QImage(QString::fromStdString(dir + "/maps.png")));

    // A session that stores a finished sweep's records renders its curves (nothing is recomputed).
    const std::string stored = dir + "/stored.attnscope";
    std::string records;
    for (const char* mech : {"softmax", "linear"})
        for (int n : {32, 64})
            records += std::string(records.empty() ? "" : ",") + R"({"mechanism": ")" + mech + R"(", "n": )" + std::to_string(n) +
                       R"(, "m": 4, "spectrum": {"rank": )" + std::to_string(mech[0] == 's' ? n : 8) +
                       R"(, "relative_rank": 0.5, "effective_rank": 6.5, "stable_rank": 2.5},
                           "entropy": {"mean": 2.5, "normalized_mean": 0.7}, "seconds": 0.01})";
    write_file(stored, session_json(fixture().grid, "curves",
                                    R"(, "sweeps": {"curves": [{"name": "N sweep", "result": {"spec": {"vary": "n", "values": [32, 64],
                                         "mechanisms": ["softmax", "linear"], "synth": {"kind": "local1d", "d": 8, "seeds": 1, "n": 0}},
                                         "records": [)" + records + "]}}]}"));
    const std::string curves = dir + "/stored_curves.svg";
    const CommandResult rs = run_attnscope("figure --session " + stored + " --view curves --out " + curves);
    ASSERT_EQ(rs.status, 0) << rs.err;
    expect_svg(curves);

    // A session of an older version kept a sweep's parameters only. It is not rerun (it may never have
    // finished): the figure says how to make the curves; the session's other views render.
    const std::string withSweep = dir + "/sweep.attnscope";
    write_file(withSweep, session_json(fixture().grid, "curves",
                                       R"(, "sweep": {"synthetic": true, "synth_kind": "local1d", "d": 8, "seeds": 2,
                                            "vary": "n", "values": "32,64", "metric": "entropy_mean"}, "overview": true)"));
    const std::string out = dir + "/sweep_entropy.svg";
    const CommandResult r = run_attnscope("figure --session " + withSweep + " --view entropy --out " + out);
    ASSERT_EQ(r.status, 0) << r.err;
    expect_svg(out);
    const std::string refused = dir + "/refused";
    fs::create_directories(refused);
    expect_refused(run_attnscope("figure --session " + withSweep + " --view curves --out " + refused + "/c.svg"), "Analysis > Sweep", refused);
    expect_refused(run_attnscope("figure --session " + withSweep + " --view overview --out " + refused + "/o.svg"), "Analysis > Model overview",
                   refused);
}

TEST(CliFigure, ErrorsExitTwoAndLeaveNothing)
{
    const std::string base = attnscope::test::fresh_work_dir("cli_figure_errors");
    int i = 0;
    auto check = [&](const std::string& args, const std::string& needle, const std::string& out_name = "fig.png") {
        const std::string dir = base + "/" + std::to_string(i++);
        fs::create_directories(dir);
        expect_refused(run_attnscope("figure " + args + " --out " + dir + "/" + out_name), needle, dir);
    };
    const Fixture& f = fixture();
    const std::string qk = " --q " + f.grid + ":/q --k " + f.grid + ":/k";
    check("--view nope" + qk, "--view nope");
    check("--view maps" + qk, ".bmp", "fig.bmp");
    check("--view maps" + qk + " --blocks 300", "mhla");                       // compute failure names the mechanism
    check("--view spectrum --q " + base + "/missing.h5 --k " + base + "/missing.h5", "missing.h5");
    check("--view maps" + qk + " --colormap rainbow", "--colormap");
    check("--view entropy" + qk + " --colormap magma", "--colormap");
    check("--view maps" + qk + " --query 999", "--query");
    check("--view curves --synth local1d --d 8 --n 32 --vary m=4,64", "64");   // impossible point: M > N
    check("--view curves --synth local1d --d 8 --vary n=32 --metric nope", "--metric");
    check("--view curves --synth local1d --d 8", "--vary");
    check("--view overview --q " + f.grid + ":/q --k " + f.grid + ":/k --blocks 300", "M=300");
    // A session without a sweep has no curves; a missing session file is named.
    const std::string sdir = base + "/session";
    fs::create_directories(sdir);
    write_file(sdir + "/../s.attnscope", session_json(f.grid, "maps"));
    expect_refused(run_attnscope("figure --session " + base + "/s.attnscope --view curves --out " + sdir + "/c.png"), "curves", sdir);
    expect_refused(run_attnscope("figure --session " + base + "/none.attnscope --view maps --out " + sdir + "/c.png"), "none.attnscope",
                   sdir);
    // A destination whose folder does not exist is refused before any work.
    const CommandResult r = run_attnscope("figure --view maps" + qk + " --out " + base + "/no/such/dir/f.png");
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
}

TEST(CliFigure, SweepPlotWritesTheCurves)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_sweep_plot");
    const std::string common = "sweep --synth local1d --d 8 --seeds 2 --vary n=32,48,64 --blocks 4";
    const CommandResult r = run_attnscope(common + " --csv " + dir + "/s.csv --json " + dir + "/s.json --plot " + dir +
                                          "/s.png --metric effective_rank");
    ASSERT_EQ(r.status, 0) << r.err;
    expect_png(dir + "/s.png");
    EXPECT_EQ(attnscope::test::read_text(dir + "/s.csv").rfind("mechanism,n,m,", 0), 0u);
    EXPECT_TRUE(fs::exists(dir + "/s.json"));
    // Same numbers, same figure: the sweep's plot and figure --view curves share one code path.
    const std::string fig = dir + "/f.png";
    ASSERT_EQ(run_attnscope("figure --view curves --synth local1d --d 8 --seeds 2 --vary n=32,48,64 --blocks 4 "
                            "--metric effective_rank --out " + fig).status, 0);
    EXPECT_EQ(QImage(QString::fromStdString(fig)), QImage(QString::fromStdString(dir + "/s.png")));
    // CSV on standard output with a PDF plot.
    const CommandResult p = run_attnscope(common + " --csv - --plot " + dir + "/s.pdf");
    ASSERT_EQ(p.status, 0) << p.err;
    EXPECT_EQ(p.out.rfind("mechanism,n,m,", 0), 0u);
    expect_pdf(dir + "/s.pdf");

    // A bad plot name (or metric) is refused before the work, and no CSV is written.
    const std::string bad = dir + "/bad";
    fs::create_directories(bad);
    expect_refused(run_attnscope(common + " --csv " + bad + "/s.csv --plot " + bad + "/s.gif"), "s.gif", bad);
    expect_refused(run_attnscope(common + " --csv " + bad + "/s.csv --plot " + bad + "/s.png --metric nope"), "--metric", bad);
    expect_refused(run_attnscope(common + " --csv " + bad + "/s.csv --metric rank"), "--plot", bad);
}

namespace {

// The width and height in points of a PDF's first page (its /MediaBox), {0, 0} when none is found.
std::pair<double, double> pdf_page_points(const std::string& path)
{
    const std::string text = attnscope::test::read_text(path);
    const auto at = text.find("/MediaBox");
    if (at == std::string::npos)
        return {0, 0};
    double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    if (std::sscanf(text.c_str() + at, "/MediaBox [%lf %lf %lf %lf]", &x0, &y0, &x1, &y1) != 4)
        return {0, 0};
    return {x1 - x0, y1 - y0};
}

}  // namespace

// Presets and printed sizes: the page is the printed size (72 pt per inch), a PNG has size x dpi pixels,
// and heatmaps go into the PDF losslessly (no DCTDecode, the JPEG filter).
TEST(CliFigure, PresetsGivePrintedSizesAndLosslessHeatmaps)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_figure_presets");
    const std::string maps = view_args("maps");
    ASSERT_EQ(run_attnscope("figure " + maps + " --preset column --out " + dir + "/col.pdf").status, 0);
    auto [w, h] = pdf_page_points(dir + "/col.pdf");
    EXPECT_NEAR(w, 3.5 * 72, 1.0);
    // Three maps with their colour scales do not fit side by side in a column: stacked, up to 9 in tall.
    EXPECT_GE(h, 1.5 * w);
    EXPECT_LE(h, 9 * 72 + 1);
    // A view with nothing to gain keeps its aspect, between 0.35 and 1.25 of the width.
    ASSERT_EQ(run_attnscope("figure " + view_args("spectrum") + " --preset column --out " + dir + "/col_spectrum.pdf").status, 0);
    std::tie(w, h) = pdf_page_points(dir + "/col_spectrum.pdf");
    EXPECT_GE(h, 0.35 * w - 1);
    EXPECT_LE(h, 1.25 * w + 1);
    // Two plots side by side (row entropy of 1-D data, the mixing matrix and its spectrum) and the overview's
    // panels (one per mechanism) stack in a column,
    // taller than wide; at double width they stay side by side at the view's aspect.
    const std::string lm = " --q " + fixture().lm + ":/q --k " + fixture().lm + ":/k --blocks 4";
    for (const std::string view : {"entropy", "mixing", "overview"}) {
        const std::string args = "--view " + view + lm;   // 1-D data: the entropy view's two line plots
        ASSERT_EQ(run_attnscope("figure " + args + " --preset column --out " + dir + "/col_" + view + ".pdf").status, 0);
        std::tie(w, h) = pdf_page_points(dir + "/col_" + view + ".pdf");
        EXPECT_GE(h, 1.3 * w) << view;
        EXPECT_LE(h, 9 * 72 + 1) << view;
        ASSERT_EQ(run_attnscope("figure " + args + " --preset double --out " + dir + "/dbl_" + view + ".pdf").status, 0);
        std::tie(w, h) = pdf_page_points(dir + "/dbl_" + view + ".pdf");
        EXPECT_LE(h, 1.25 * w + 1) << view;
    }
    // The metrics table keeps every row: a column figure grows to hold them (the last row, "error", is in the
    // SVG's text); a height too small for them says how many are left out instead of dropping them.
    ASSERT_EQ(run_attnscope("figure --view metrics" + lm + " --preset column --out " + dir + "/col_metrics.svg").status, 0);
    const std::string table = attnscope::test::read_text(dir + "/col_metrics.svg");
    EXPECT_NE(table.find(">error<"), std::string::npos);
    EXPECT_EQ(table.find("left out"), std::string::npos);
    ASSERT_EQ(run_attnscope("figure --view metrics" + lm + " --width 800 --height 200 --out " + dir + "/short_metrics.svg").status, 0);
    EXPECT_NE(attnscope::test::read_text(dir + "/short_metrics.svg").find("more row(s) left out"), std::string::npos);
    // A height given is kept.
    ASSERT_EQ(run_attnscope("figure " + maps + " --preset column --height-mm 50 --out " + dir + "/col_50.pdf").status, 0);
    EXPECT_NEAR(pdf_page_points(dir + "/col_50.pdf").second, 50 / 25.4 * 72, 1.0);
    const std::string pdf = attnscope::test::read_text(dir + "/col.pdf");
    EXPECT_NE(pdf.find("/Subtype /Image"), std::string::npos) << "the heatmaps are images";
    EXPECT_EQ(pdf.find("/DCTDecode"), std::string::npos) << "a heatmap was stored as a JPEG";

    ASSERT_EQ(run_attnscope("figure " + maps + " --preset double --out " + dir + "/double.pdf").status, 0);
    EXPECT_NEAR(pdf_page_points(dir + "/double.pdf").first, 7 * 72, 1.0);
    ASSERT_EQ(run_attnscope("figure " + view_args("mixing") + " --preset slide --out " + dir + "/slide.pdf").status, 0);
    std::tie(w, h) = pdf_page_points(dir + "/slide.pdf");
    EXPECT_NEAR(w, 10 * 72, 1.0);
    EXPECT_NEAR(h, w * 9 / 16, 1.0);
    ASSERT_EQ(run_attnscope("figure " + view_args("spectrum") + " --width-mm 120 --height-mm 80 --font-size 9 --out " + dir + "/mm.svg")
                  .status,
              0);
    expect_svg(dir + "/mm.svg");
    ASSERT_EQ(run_attnscope("figure " + view_args("spectrum") + " --width-mm 120 --height-mm 80 --out " + dir + "/mm.pdf").status, 0);
    std::tie(w, h) = pdf_page_points(dir + "/mm.pdf");
    EXPECT_NEAR(w, 120 / 25.4 * 72, 1.0);
    EXPECT_NEAR(h, 80 / 25.4 * 72, 1.0);
    // PNG: 3.5 in at 300 dpi.
    ASSERT_EQ(run_attnscope("figure " + view_args("entropy") + " --preset column --dpi 300 --out " + dir + "/col.png").status, 0);
    expect_png(dir + "/col.png");
    EXPECT_NEAR(QImage(QString::fromStdString(dir + "/col.png")).width(), 1050, 2);
}

// Absurd sizes, unknown view-state keys and a token grid that does not fit N are refused before any work:
// exit 2, one error line, no file.
TEST(CliFigure, AbsurdOptionsAreRefused)
{
    const std::string base = attnscope::test::fresh_work_dir("cli_figure_absurd");
    int i = 0;
    auto check = [&](const std::string& args, const std::string& needle) {
        const std::string dir = base + "/" + std::to_string(i++);
        fs::create_directories(dir);
        expect_refused(run_attnscope("figure " + args + " --out " + dir + "/fig.pdf"), needle, dir);
    };
    const std::string maps = view_args("maps");
    check(maps + " --width 0", "--width");
    check(maps + " --width -5", "--width");
    check(maps + " --width=-300", "--width");
    check(maps + " --height 0", "--height");
    check(maps + " --width 100000", "--width");
    check(maps + " --dpi 0", "--dpi");
    check(maps + " --preset a4", "--preset");
    check(maps + " --preset column --width 300", "--width");
    check(maps + " --width-mm 0", "--width-mm");
    check(maps + " --width-mm 90 --font-size 0.5", "--font-size");
    check(maps + " --height-mm 60", "--height-mm");
    check(maps + " --view-state '{\"colour\": \"red\"}'", "colour");
    check(view_args("spectrum") + " --view-state '{\"cumulative\": true, \"nope\": 1}'", "nope");
    check(view_args("curves") + " --view-state '{\"nope\": 1}'", "nope");
    check(view_args("query") + " --token-grid 3,3", "--token-grid");
    check(view_args("query") + " --token-grid 7,9", "N=64");
}
