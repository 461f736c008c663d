// Headless figures by the desktop app's own views (figure.h).
#include "figure.h"

#include <QApplication>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QThread>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include "analysis/depth_curves.h"
#include "analysis/explore.h"
#include "analysis/heads.h"
#include "analysis/job.h"
#include "analysis/measure.h"
#include "analysis/session_rules.h"
#include "analysis/sweep.h"
#include "curves.h"
#include "depth_view.h"
#include "export.h"
#include "heads_view.h"
#include "main_window.h"
#include "qt_platform.h"
#include "result_view.h"
#include "session.h"
#include "util/output.h"
#include "util/error.h"
#include "util/json_text.h"
#include "views.h"

namespace attnscope::app {

namespace {

constexpr double kDefaultFontPt = 8.0;   // tick labels of a --width-mm figure without --font-size

// A figure promises one `error:` line on stderr: Qt's platform chatter (XDG_RUNTIME_DIR,
// propagateSizeHints on offscreen) is dropped unless ATTNSCOPE_QT_MESSAGES is set.
void quiet_figure_handler(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    if (type == QtFatalMsg)
        std::fprintf(stderr, "qt: %s\n", message.toLocal8Bit().constData());
}

// The QApplication of one figure: always on the offscreen platform (an `offscreen:...` value of
// QT_QPA_PLATFORM keeps its options), created before any widget and destroyed after them. Nested use (a test that already has an application) reuses it.
class GuiScope {
public:
    GuiScope()
    {
        if (QCoreApplication::instance())
            return;
        (void)prepare_qt_platform(QtUse::headless);   // offscreen, whatever QT_QPA_PLATFORM says (docs/cli.md)
        if (!std::getenv("ATTNSCOPE_QT_MESSAGES"))
            m_previous = qInstallMessageHandler(quiet_figure_handler);
        QtFatalGuard guard;   // Qt aborts when a platform fails to start: one error line, exit 2
        m_app = std::make_unique<QApplication>(m_argc, m_argv);
        QApplication::setApplicationName(QStringLiteral("AttnScope"));
        QApplication::setOrganizationName(QStringLiteral("AttnScope"));
        QApplication::setApplicationVersion(QStringLiteral(ATTNSCOPE_VERSION));
    }
    ~GuiScope()
    {
        m_app.reset();
        if (m_previous)
            qInstallMessageHandler(m_previous);
    }
    GuiScope(const GuiScope&) = delete;
    GuiScope& operator=(const GuiScope&) = delete;

private:
    int m_argc = 1;
    char m_name[10] = "attnscope";
    char* m_argv[2] = {m_name, nullptr};
    std::unique_ptr<QApplication> m_app;
    QtMessageHandler m_previous = nullptr;
};

// Pixels and font scale as given, or from the printed size (a preset, or --width-mm) at the view's aspect
// (or the height the view asks for at that width: ResultView::exportHeightFor).
widgets::ExportOptions export_options(const FigureTarget& t, widgets::ResultView* view)
{
    const QSize preferred = view ? view->preferredExportSize() : QSize();
    auto fitted = [view](widgets::ExportOptions o, bool height_given) {
        if (view && !height_given)
            o.height = view->exportHeightFor(o.width, o.font_scale, o.height);
        return o;
    };
    if (const widgets::ExportPreset* p = widgets::findExportPreset(QString::fromStdString(t.preset))) {
        const double width_mm = p->widthMm;
        const double height_mm = t.height_mm > 0 ? t.height_mm : p->aspect > 0 ? width_mm * p->aspect : 0.0;
        return fitted(widgets::printOptions(width_mm, height_mm, t.font_pt > 0 ? t.font_pt : p->fontPt, preferred, t.dpi),
                      height_mm > 0);
    }
    if (t.width_mm > 0)
        return fitted(widgets::printOptions(t.width_mm, t.height_mm, t.font_pt > 0 ? t.font_pt : kDefaultFontPt, preferred, t.dpi),
                      t.height_mm > 0);
    widgets::ExportOptions o;
    o.width = t.width;
    o.height = t.height;
    o.dpi = t.dpi;
    o.font_scale = t.font_scale;
    return o;
}

// Writes the view through a temporary file next to `path` (renamed on success): exportView's own
// temporary file is renamed onto ours, ours onto the destination. exportView's messages name the file
// they were given; a message about our temporary file names the destination instead.
void export_to(widgets::ResultView* view, const std::string& path, const FigureTarget& target, bool commit)
{
    auto render = [&](const std::string& file) {
        const QString err = widgets::exportView(view, QString::fromStdString(file), export_options(target, view));
        if (!err.isEmpty())
            throw InputError(err.toStdString());
    };
    if (commit) {
        OutputFile out(path, SpecialFiles::refuse);
        out.write(render);
        out.commit();
        return;
    }
    render(path);
}

// The look as view-state keys of `view` (the keys its saveState() writes); options a view has no key
// for are refused by name.
QJsonObject state_for(const std::string& view, const FigureLook& look, const QJsonObject& saved)
{
    QJsonObject s = saved;
    if (look.colormap) {
        if (!saved.contains(QStringLiteral("colormap")))
            throw std::invalid_argument("--colormap: the " + view + " view has no colour map (maps, overview)");
        const std::string c = *look.colormap;
        if (c != "viridis" && c != "magma" && c != "cividis")
            throw std::invalid_argument("--colormap " + c + " is not one of viridis, magma, cividis");
        s[QStringLiteral("colormap")] = QString::fromStdString(c);
    }
    if (look.log) {
        // The view's own log switch: maps "log" (colours), query "log_y", spectrum "log_x" (booleans),
        // curves "y_scale" (the x axis of N is logarithmic already).
        const char* keys[] = {"log", "log_y", "log_x"};
        bool set = false;
        for (const char* k : keys)
            if (!set && saved.contains(QLatin1String(k))) {
                s[QLatin1String(k)] = true;
                set = true;
            }
        if (!set && saved.contains(QStringLiteral("y_scale"))) {
            s[QStringLiteral("y_scale")] = QStringLiteral("log");
            set = true;
        }
        if (!set)
            throw std::invalid_argument("--log: the " + view + " view has no log scale");
    }
    if (look.query)
        s[QStringLiteral("query")] = *look.query;
    if (look.metric)
        s[QStringLiteral("metric")] = QString::fromStdString(*look.metric);
    if (look.state.is_object()) {
        const QJsonDocument extra = QJsonDocument::fromJson(QByteArray::fromStdString(json_text(look.state)));
        const QJsonObject o = extra.object();
        // The keys the view saves, and those it saves only in some states (a zoomed maps view, hidden curves).
        QStringList known = saved.keys();
        for (const char* k : {"x_range", "y_range", "hidden_runs", "query"})
            if (!known.contains(QLatin1String(k)))
                known << QLatin1String(k);
        known.sort();
        try {
            analysis::check_view_state_numbers(look.state, "--view-state");   // first_head, query: whole numbers in range
        } catch (const std::exception& e) {
            throw std::invalid_argument(e.what());
        }
        // The type each key has in the view's own state (a string for a boolean was read as false in silence).
        const auto type_name = [](const QJsonValue& v) {
            return v.isBool() ? "true or false" : v.isDouble() ? "a number" : v.isString() ? "a string" : v.isArray() ? "an array"
                                                                                         : v.isObject() ? "an object" : "null";
        };
        const QJsonObject kinds{{QStringLiteral("x_range"), QJsonArray{0.0, 1.0}},
                                {QStringLiteral("y_range"), QJsonArray{0.0, 1.0}},
                                {QStringLiteral("hidden_runs"), QJsonArray{}},
                                {QStringLiteral("query"), 0}};
        for (auto it = o.begin(); it != o.end(); ++it) {
            if (!known.contains(it.key()))
                throw std::invalid_argument("--view-state: the " + view + " view has no key '" + it.key().toStdString() +
                                            "' (its keys: " + known.join(QStringLiteral(", ")).toStdString() + ")");
            const QJsonValue want = saved.contains(it.key()) && !saved.value(it.key()).isNull() ? saved.value(it.key())
                                                                                                 : kinds.value(it.key());
            if (!want.isNull() && !it.value().isNull() && std::string(type_name(want)) != type_name(it.value()))
                throw std::invalid_argument("--view-state: '" + it.key().toStdString() + "' of the " + view + " view must be " +
                                            type_name(want) + " (got " + type_name(it.value()) + ")");
            if ((it.key() == QLatin1String("x_range") || it.key() == QLatin1String("y_range")) &&
                (it.value().toArray().size() != 2 || !it.value().toArray()[0].isDouble() || !it.value().toArray()[1].isDouble() ||
                 !std::isfinite(it.value().toArray()[0].toDouble()) || !std::isfinite(it.value().toArray()[1].toDouble())))
                throw std::invalid_argument("--view-state: '" + it.key().toStdString() + "' must be two finite numbers [low, high]");
            if (it.key() == QLatin1String("alpha") && !(it.value().toDouble() >= 0.0 && it.value().toDouble() <= 1.0))
                throw std::invalid_argument("--view-state: 'alpha' of the " + view + " view must lie in [0, 1] (got " +
                                            std::to_string(it.value().toDouble()) + ")");
            s[it.key()] = it.value();
        }
    } else if (!look.state.is_null()) {
        throw std::invalid_argument("--view-state must be a JSON object, e.g. {\"cumulative\": true}");
    }
    return s;
}

widgets::ResultView* find_view(const QList<widgets::ResultView*>& views, const std::string& name)
{
    for (widgets::ResultView* v : views)
        if (v->viewName().toStdString() == name)
            return v;
    return nullptr;
}

// A mechanism that could not be computed fails the figure, naming it (the view would show an error panel).
void require_outcomes(const analysis::ExploreResult& r)
{
    for (const auto& o : r.outcomes)
        if (!o.error.empty())
            throw InputError(std::string(attention::to_string(o.result.mechanism)) + ": " + o.error);
}

}  // namespace

void check_figure_target(const std::string& view, const FigureTarget& target)
{
    if (!is_explore_view(view) && !is_sweep_view(view))
        throw std::invalid_argument("--view " + view + " is not one of " + figure_view_names());
    std::string ext = std::filesystem::path(target.path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".png" && ext != ".pdf" && ext != ".svg")
        throw std::invalid_argument("--out " + target.path + ": name a .png, .pdf or .svg file");
    // CLI11's range checks let NaN through (every comparison with NaN is false), and a NaN size was then
    // ignored as "unset": every real-valued size option must be a finite number.
    for (const auto& [name, value] : {std::pair{"--width-mm", target.width_mm}, std::pair{"--height-mm", target.height_mm},
                                      std::pair{"--font-size", target.font_pt}, std::pair{"--dpi", target.dpi},
                                      std::pair{"--font-scale", target.font_scale}})
        if (!std::isfinite(value))
            throw std::invalid_argument(std::string(name) + " must be a finite number (got " + std::to_string(value) + ")");
    if (target.width < 0 || target.height < 0 || (target.width > 0 && target.width < 16) || (target.height > 0 && target.height < 16) ||
        target.width > 20000 || target.height > 20000)
        throw std::invalid_argument("--width/--height must lie in 16..20000 logical pixels");
    if (!(target.dpi >= 24 && target.dpi <= 2400))
        throw std::invalid_argument("--dpi must lie in 24..2400");
    if (!(target.font_scale > 0.1 && target.font_scale <= 10))
        throw std::invalid_argument("--font-scale must lie in (0.1, 10]");
    if (!target.preset.empty() && !widgets::findExportPreset(QString::fromStdString(target.preset)))
        throw std::invalid_argument("--preset " + target.preset + " is not one of column, double, slide");
    const bool printed = !target.preset.empty() || target.width_mm > 0;
    if ((target.height_mm > 0 || target.font_pt > 0) && !printed)
        throw std::invalid_argument("--height-mm and --font-size size a printed figure: give --preset or --width-mm with them");
    if (printed && (target.width > 0 || target.height > 0))
        throw std::invalid_argument("--preset and --width-mm set the size: give no --width or --height with them");
    // A size Qt cannot draw is refused before any work when it is known now (given in pixels, or a printed
    // width and height); a size that follows the view (its preferred size, or its aspect) is checked
    // when the figure is drawn (widgets::exportView, the same rule).
    std::optional<QSize> known;
    if (target.width > 0 && target.height > 0)
        known = QSize(target.width, target.height);
    const widgets::ExportPreset* preset = widgets::findExportPreset(QString::fromStdString(target.preset));
    const double width_mm = preset ? preset->widthMm : target.width_mm;
    const double height_mm = target.height_mm > 0 ? target.height_mm : preset && preset->aspect > 0 ? preset->widthMm * preset->aspect : 0.0;
    if (width_mm > 0 && height_mm > 0) {
        const widgets::ExportOptions o = widgets::printOptions(width_mm, height_mm, kDefaultFontPt, QSize(), target.dpi);
        known = QSize(o.width, o.height);
    }
    if (known) {
        const QString problem = widgets::exportSizeProblem(QString::fromStdString(ext.substr(1)), known->width(), known->height(),
                                                           target.dpi, analysis::default_memory_limit());
        if (!problem.isEmpty())
            throw std::invalid_argument(std::string(printed ? "--width-mm/--height-mm: " : "--width/--height: ") + problem.toStdString());
    }
    OutputFile probe(target.path, SpecialFiles::refuse);   // the folder exists and is writable; not a device or FIFO
}

void check_figure_look(const std::string& view, const FigureLook& look)
{
    if (!look.colormap && !look.log && !look.metric && look.state.is_null())
        return;
    GuiScope gui;
    std::unique_ptr<widgets::ResultView> v;
    if (is_sweep_view(view)) {
        v.reset(view == "curves" ? widgets::createCurvesView(nullptr) : widgets::createOverviewView(nullptr));
    } else {
        QList<widgets::ResultView*> views = widgets::createAllViews(nullptr);
        for (widgets::ResultView* candidate : views)
            if (candidate->viewName().toStdString() == view)
                v.reset(candidate);
        views.removeOne(v.get());
        qDeleteAll(views);
    }
    if (!v)
        throw std::invalid_argument("--view " + view + ": no such view in this build");
    FigureLook rest = look;
    rest.metric.reset();   // checked by check_figure_metric
    state_for(view, rest, v->saveState());
}

void render_explore_figure(const analysis::ExploreRequest& request, const std::string& view, const FigureLook& look,
                           const FigureTarget& target, const analysis::ExplicitChoices* given)
{
    check_figure_target(view, target);
    if (!is_explore_view(view))
        throw std::invalid_argument("--view " + view + " needs a sweep (--vary) or the overview; this figure shows one of " +
                                    figure_explore_view_names());
    // The view and its state first: a look it cannot show is refused before any computation.
    GuiScope gui;
    const QList<widgets::ResultView*> views = widgets::createAllViews(nullptr);
    struct Owner {
        QList<widgets::ResultView*> v;
        ~Owner() { qDeleteAll(v); }
    } owner{views};
    widgets::ResultView* v = find_view(views, view);
    if (!v)
        throw std::invalid_argument("--view " + view + ": no such view in this build");
    const QJsonObject state = state_for(view, look, v->saveState());

    analysis::JobContext ctx;
    auto result = std::make_shared<const analysis::ExploreResult>(analysis::explore(request, ctx));
    require_outcomes(*result);
    if (look.query && (*look.query < 0 || *look.query >= result->n))
        throw std::invalid_argument("--query " + std::to_string(*look.query) + " is not a token of N=" + std::to_string(result->n));
    v->setResult(result);
    v->restoreState(state);
    if (look.query)
        v->setQuery(*look.query);
    if (auto* heads = qobject_cast<widgets::HeadsView*>(v)) {
        // The page of heads the view's state names (first_head, default 0), computed as the app computes it.
        analysis::HeadsRequest page;
        page.base = request;
        page.first = heads->pageFirst();
        page.count = widgets::HeadsView::kPageSize;
        heads->setHeads(std::make_shared<const analysis::HeadsResult>(analysis::explore_heads(page, ctx)));
    }
    if (auto* depth = qobject_cast<widgets::DepthView*>(v)) {
        // The products of the file's layers for the view's state (alpha, head_mean), computed as the app computes them.
        analysis::ExploreDepthRequest d;
        d.base = request;
        if (given)
            d.given = *given;
        else
            d.given = analysis::ExplicitChoices{true, true, true, true, true, true};
        d.head_mean = depth->headMean();
        d.alpha = depth->alpha();
        auto products = std::make_shared<const analysis::ExploreDepthResult>(analysis::explore_depth(d, ctx));
        if (!products->unavailable.empty())
            throw InputError(products->unavailable);
        for (const analysis::DepthCurve& c : products->curves)
            if (!c.warnings.empty())   // a chain that broke would be drawn short: said, as a failed mechanism is
                std::fprintf(stderr, "warning: %s, %s\n", std::string(attention::to_string(c.mechanism)).c_str(), c.warnings.front().c_str());
        depth->setDepth(std::move(products));
    }
    export_to(v, target.path, target, true);
}

void render_sweep_figure_to(std::shared_ptr<const analysis::SweepResult> sweep, const std::string& view,
                            const FigureLook& look, const FigureTarget& target, const std::string& path)
{
    if (!is_sweep_view(view))
        throw std::invalid_argument("--view " + view + " does not show a sweep (curves, overview)");
    if (!sweep || sweep->records.empty())
        throw InputError("the sweep produced no records to plot");
    check_figure_metric(look.metric);
    GuiScope gui;
    std::unique_ptr<widgets::SweepView> v(view == "curves" ? widgets::createCurvesView(nullptr) : widgets::createOverviewView(nullptr));
    v->setSweep(std::move(sweep));
    FigureLook rest = look;
    rest.metric.reset();   // setMetric below is the interface's way
    v->restoreState(state_for(view, rest, v->saveState()));
    if (look.metric)
        v->setMetric(QString::fromStdString(*look.metric));
    export_to(v.get(), path, target, false);
}

void render_sweep_figure(std::shared_ptr<const analysis::SweepResult> sweep, const std::string& view,
                         const FigureLook& look, const FigureTarget& target)
{
    check_figure_target(view, target);
    OutputFile out(target.path, SpecialFiles::refuse);
    out.write([&](const std::string& temp) { render_sweep_figure_to(std::move(sweep), view, look, target, temp); });
    out.commit();
}

std::vector<NamedPath> session_inputs(const std::string& session)
{
    std::vector<NamedPath> out{{"--session", session}};
    const QString path = QFile::decodeName(QByteArray::fromStdString(session));
    const auto doc = widgets::readSessionFile(path, nullptr);
    if (!doc)
        return out;
    try {
        for (auto& [key, file] : analysis::session_input_files(widgets::sessionDocumentForCore(*doc), session))
            out.push_back({"the session's " + key, std::move(file)});
    } catch (const std::exception&) {
        // Text that is not valid Unicode: loading the session refuses it.
    }
    return out;
}

void render_session_figure(const std::string& session, const std::string& view, const FigureTarget& target)
{
    check_figure_target(view, target);
    GuiScope gui;
    widgets::MainWindow window;
    window.setInteractive(false);
    QString error;
    if (!window.loadSession(QString::fromStdString(session), &error))
        throw InputError(error.toStdString());
    // The session's computations (explore, the heads of the Heads view, the Depth view's products and the sweeps
    // it records) run in the background; the heads and the depth are computed while their tab is current.
    if (view == "heads" || view == "depth")
        window.setCurrentView(QString::fromStdString(view));
    QElapsedTimer timer;
    timer.start();
    while (window.isComputing() || window.isSweeping()) {
        if (timer.elapsed() > 60LL * 60 * 1000)
            throw InputError("session " + session + ": timed out waiting for the computation");
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(5);
    }
    QCoreApplication::processEvents();
    widgets::ResultView* v = nullptr;
    if (is_sweep_view(view)) {
        if (!window.lastSweepError().isEmpty())
            throw InputError("session " + session + ": " + window.lastSweepError().toStdString());
        v = view == "curves" ? window.curvesView() : window.overviewView();
        if (!v || !window.hasSweepResult(QString::fromStdString(view)))
            throw InputError("session " + session + " has no " + view + " (run " +
                             (view == "curves" ? std::string("Analysis > Sweep") : std::string("Analysis > Model overview")) +
                             " in the app and save the session again)");
    } else {
        if (!window.result())
            throw InputError("session " + session + ": " +
                             (window.lastError().isEmpty() ? std::string("nothing to compute") : window.lastError().toStdString()));
        require_outcomes(*window.result());
        v = find_view(window.views(), view);
        if (!v)
            throw std::invalid_argument("--view " + view + ": no such view in this build");
    }
    export_to(v, target.path, target, true);
}

}  // namespace attnscope::app
