#include "widget_test_support.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QSet>
#include <QStandardPaths>
#include <QThread>
#include <QXmlStreamReader>
#include <stdexcept>

#include "export.h"
#include "support/attnscope_binary.h"
#include "support/test_support.h"

namespace attnscope::test {

std::string dataPath(const std::string& name) { return tests_path("../data/" + name); }

ExploreResultPtr exploreFile(const std::string& path, const std::function<void(analysis::ExploreRequest&)>& configure)
{
    analysis::ExploreRequest r;
    r.source.q_ref = io::parse_tensor_ref(path + ":/q");
    r.source.k_ref = io::parse_tensor_ref(path + ":/k");
    if (configure)
        configure(r);
    return std::make_shared<const analysis::ExploreResult>(analysis::explore(r, analysis::JobContext{}));
}

QCustomPlot* plotOf(widgets::ResultView* view) { return view->findChild<QCustomPlot*>(); }

QCustomPlot* showOnScreen(widgets::ResultView* view, QSize size, const std::function<void()>& setData)
{
    view->resize(size);
    if (setData)
        setData();
    view->show();
    QCustomPlot* plot = plotOf(view);
    plot->replot();
    return plot;
}

QCPGraph* graphNamed(QCustomPlot* plot, const QString& prefix)
{
    for (int i = 0; i < plot->graphCount(); ++i)
        if (plot->graph(i)->name().startsWith(prefix))
            return plot->graph(i);
    return nullptr;
}

QList<QCPColorMap*> colourMaps(QCustomPlot* plot)
{
    QList<QCPColorMap*> out;
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (auto* m = qobject_cast<QCPColorMap*>(plot->plottable(i)))
            out << m;
    return out;
}

QList<QCPColorScale*> colourScales(QCustomPlot* plot)
{
    QList<QCPColorScale*> out;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* s = qobject_cast<QCPColorScale*>(e))
            out << s;
    return out;
}

int distinctColours(const QImage& img, double* nonWhiteFraction)
{
    QSet<QRgb> colours;
    qint64 nonWhite = 0;
    for (int y = 0; y < img.height(); y += 2)
        for (int x = 0; x < img.width(); x += 2) {
            const QRgb c = img.pixel(x, y);
            colours.insert(c);
            if (qRed(c) < 245 || qGreen(c) < 245 || qBlue(c) < 245)
                ++nonWhite;
        }
    if (nonWhiteFraction)
        *nonWhiteFraction = double(nonWhite) / (double(img.width() / 2) * (img.height() / 2));
    return colours.size();
}

void checkExports(widgets::ResultView* view, const QString& dir, const QString& tag, const ExportChecks& checks)
{
    const QString base = dir + "/" + view->viewName() + "_" + tag;
    const std::string what = view->viewName().toStdString() + " " + tag.toStdString();
    widgets::ExportOptions opt;
    opt.dpi = 96;
    ASSERT_EQ(widgets::exportView(view, base + ".png", opt), QString());
    const QImage img(base + ".png");
    ASSERT_FALSE(img.isNull()) << base.toStdString();
    EXPECT_EQ(img.size(), view->preferredExportSize());
    double nonWhite = 0;
    const int colours = distinctColours(img, &nonWhite);
    EXPECT_GT(nonWhite, checks.colourful ? 0.01 : 0.001) << what;
    EXPECT_GT(colours, checks.colourful ? 40 : 8) << what;

    if (checks.hiDpi) {
        opt.dpi = 192;
        ASSERT_EQ(widgets::exportView(view, base + "_hi.png", opt), QString());
        EXPECT_EQ(QImage(base + "_hi.png").size(), view->preferredExportSize() * 2);
    }

    ASSERT_EQ(widgets::exportView(view, base + ".pdf", opt), QString());
    QFile pdf(base + ".pdf");
    ASSERT_TRUE(pdf.open(QIODevice::ReadOnly));
    const QByteArray bytes = pdf.readAll();
    EXPECT_TRUE(bytes.startsWith("%PDF")) << base.toStdString();
    EXPECT_GT(bytes.size(), 1500);
    if (checks.hiDpi) {
        EXPECT_LT(bytes.size(), 30 * 1024 * 1024);
    }

    ASSERT_EQ(widgets::exportView(view, base + ".svg", opt), QString());
    QFile svg(base + ".svg");
    ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
    const QByteArray svgText = svg.readAll();
    if (checks.hiDpi) {
        EXPECT_TRUE(svgText.contains("<svg"));
    }
    QXmlStreamReader xml(svgText);
    int elements = 0;
    while (!xml.atEnd())
        if (xml.readNext() == QXmlStreamReader::StartElement)
            ++elements;
    EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
    EXPECT_GT(elements, 10);
    EXPECT_TRUE(svgText.contains("DejaVu Sans"));
}

void useTestSettings()
{
    QStandardPaths::setTestModeEnabled(true);   // recent files go to a test settings folder
    QCoreApplication::setOrganizationName(QStringLiteral("AttnScopeTest"));
}

QString windowFixture(const char* name)
{
    static const std::string dir = [] {
        const std::string d = fresh_work_dir("window_fixtures");
        run_python("widgets/make_window_fixtures.py", {d});
        return d;
    }();
    return QDir(QString::fromStdString(dir)).filePath(QString::fromLatin1(name));
}

QString threeHeadFile()
{
    static const QString path = [] {
        const std::string dir = fresh_work_dir("window_sweep_fixtures");
        const std::string file = dir + "/lm.h5";
        const auto r = run_attnscope("synth --n 96 --d 8 --heads 3 --kind local1d --out " + file);
        if (r.status != 0)
            throw std::runtime_error(r.err);
        return QString::fromStdString(file);
    }();
    return path;
}

bool waitUntil(const std::function<bool()>& done, int ms)
{
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        if (done())
            return true;
        QThread::msleep(2);
    }
    return false;
}

bool waitIdle(const widgets::MainWindow& w, int ms)
{
    return waitUntil([&] { return !w.isComputing(); }, ms);
}

bool TestWindow::openAndWait(const QStringList& files)
{
    openFiles(files);
    return waitIdle(*this);
}

bool waitSweeps(const widgets::MainWindow& w, int ms)
{
    return waitUntil([&] { return !w.isSweeping() && !w.isComputing(); }, ms);
}
}  // namespace attnscope::test
