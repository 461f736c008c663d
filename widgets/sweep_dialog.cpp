// The sweep dialog, its parameters (JSON for sessions) and the core SweepSpec they make; see sweep_dialog.h.
#include "sweep_dialog.h"

#include "analysis/synth.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <stdexcept>

#include "widget_util.h"

namespace attnscope::widgets {

namespace {

QStringList qNames(const std::vector<std::string_view>& names)
{
    QStringList out;
    for (const std::string_view n : names)
        out << QString::fromLatin1(n.data(), qsizetype(n.size()));
    return out;
}

QStringList qNames(const std::vector<std::string>& names)
{
    QStringList out;
    for (const std::string& n : names)
        out << QString::fromStdString(n);
    return out;
}

std::vector<Eigen::Index> parseValues(const QString& text, QChar vary)
{
    std::vector<Eigen::Index> out;
    const QString what = vary == QLatin1Char('m') ? QStringLiteral("block counts M") : QStringLiteral("sequence lengths N");
    for (const QString& item : text.split(QLatin1Char(','), Qt::KeepEmptyParts)) {
        bool ok = false;
        const qlonglong v = item.trimmed().toLongLong(&ok);
        if (!ok || v < 1)
            throw std::invalid_argument(QStringLiteral("%1 \"%2\": '%3' is not a positive integer").arg(what, text, item.trimmed()).toStdString());
        out.push_back(static_cast<Eigen::Index>(v));
    }
    return out;
}

}  // namespace

QJsonObject SweepParams::toJson() const
{
    QJsonObject o;
    o[QStringLiteral("synthetic")] = synthetic;
    o[QStringLiteral("synth_kind")] = synthKind;
    o[QStringLiteral("d")] = d;
    o[QStringLiteral("seeds")] = seeds;
    o[QStringLiteral("n")] = n;
    o[QStringLiteral("blocks")] = blocks;
    o[QStringLiteral("vary")] = QString(vary);
    o[QStringLiteral("values")] = values;
    o[QStringLiteral("subsample")] = subsample;
    o[QStringLiteral("draws")] = draws;
    o[QStringLiteral("seed")] = seed;
    o[QStringLiteral("heads")] = allHeads ? QStringLiteral("all") : QStringLiteral("current");
    o[QStringLiteral("mechanisms")] = QJsonArray::fromStringList(mechanisms);
    o[QStringLiteral("metric")] = metric;
    return o;
}

SweepParams SweepParams::fromJson(const QJsonObject& o)
{
    SweepParams p;
    p.synthetic = o.value(QStringLiteral("synthetic")).toBool(p.synthetic);
    p.synthKind = o.value(QStringLiteral("synth_kind")).toString(p.synthKind);
    p.d = o.value(QStringLiteral("d")).toInt(p.d);
    p.seeds = o.value(QStringLiteral("seeds")).toInt(p.seeds);
    p.n = o.value(QStringLiteral("n")).toInt(p.n);
    p.blocks = o.value(QStringLiteral("blocks")).toInt(p.blocks);
    const QString vary = o.value(QStringLiteral("vary")).toString(QString(p.vary));
    p.vary = vary.isEmpty() ? p.vary : vary.at(0);
    p.values = o.value(QStringLiteral("values")).toString(p.values);
    p.subsample = o.value(QStringLiteral("subsample")).toString(p.subsample);
    p.draws = o.value(QStringLiteral("draws")).toInt(p.draws);
    p.seed = static_cast<qint64>(o.value(QStringLiteral("seed")).toDouble(double(p.seed)));
    p.allHeads = o.value(QStringLiteral("heads")).toString() == QLatin1String("all");
    if (o.contains(QStringLiteral("mechanisms"))) {
        p.mechanisms.clear();
        for (const auto& m : o.value(QStringLiteral("mechanisms")).toArray())
            p.mechanisms << m.toString();
    }
    p.metric = o.value(QStringLiteral("metric")).toString(p.metric);
    return p;
}

analysis::SweepSpec sweepSpec(const SweepParams& p, const analysis::TensorSource* current, const attention::AttentionOptions& options)
{
    analysis::SweepSpec spec;
    if (p.vary != QLatin1Char('n') && p.vary != QLatin1Char('m'))
        throw std::invalid_argument("vary must be n or m");
    spec.vary = p.vary.toLatin1();
    spec.values = parseValues(p.values, p.vary);
    spec.subsample = analysis::parse_subsample(p.subsample.toStdString());
    if (p.draws < 1)
        throw std::invalid_argument("draws must be at least 1");
    if (p.draws > 1 && spec.subsample != analysis::Subsample::random)
        throw std::invalid_argument("several draws need random subsets");
    spec.draws = p.draws;
    if (p.seed < 0)
        throw std::invalid_argument("the seed must be non-negative");
    spec.seed = static_cast<std::uint64_t>(p.seed);
    spec.mechanisms.clear();
    for (const QString& m : p.mechanisms)
        spec.mechanisms.push_back(attention::parse_mechanism(m.toStdString()));
    if (spec.mechanisms.empty())
        throw std::invalid_argument("choose at least one mechanism");
    spec.options = options;
    spec.given = {true, true, true, true};   // the window's panels show every option in use
    if (p.synthetic) {
        if (p.d < 1 || p.seeds < 1)
            throw std::invalid_argument("synthetic d and seeds must be at least 1");
        if (spec.vary == 'm' && p.n < 1)
            throw std::invalid_argument("synthetic data varied over M needs N tokens");
        if (p.blocks < 1)
            throw std::invalid_argument("synthetic data needs at least one MHLA block");
        spec.synth = analysis::SynthSource{p.synthKind.toStdString(), p.d, p.seeds, spec.vary == 'm' ? p.n : 0};
        spec.options.blocks = attention::BlockSpec{};
        spec.options.blocks.kind = attention::BlockSpec::Kind::count;
        spec.options.blocks.blocks = p.blocks;
    } else {
        if (!current)
            throw std::invalid_argument("no queries and keys are assigned: open data, or choose synthetic data");
        spec.inputs = {*current};
        if (p.allHeads)
            spec.heads = analysis::AxisChoice::all("heads");
    }
    return spec;
}

SweepDialog::SweepDialog(const SweepParams& initial, bool haveData, QWidget* parent) : QDialog(parent), m_haveData(haveData)
{
    setWindowTitle(tr("Sweep: rank and entropy against N or M"));
    auto* outer = new QVBoxLayout(this);
    outer->addWidget(buildDataBox(initial));
    outer->addWidget(buildSweepBox(initial));

    m_problem = problemLabel(this, QStringLiteral("#a00000"));
    outer->addWidget(m_problem);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Run"));
    connect(buttons, &QDialogButtonBox::accepted, this, &SweepDialog::checkAndAccept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    outer->addWidget(buttons);

    if (!haveData) {
        m_current->setEnabled(false);
        m_current->setToolTip(tr("Open data and assign queries and keys first"));
    }
    (initial.synthetic || !haveData ? m_synth : m_current)->setChecked(true);
    for (QRadioButton* r : {m_current, m_synth})
        connect(r, &QRadioButton::toggled, this, &SweepDialog::updateEnabled);
    connect(m_vary, &QComboBox::currentIndexChanged, this, &SweepDialog::updateEnabled);
    connect(m_subsample, &QComboBox::currentIndexChanged, this, &SweepDialog::updateEnabled);
    updateEnabled();
}

// The data: the window's queries and keys, or synthetic data of a kind, d, seeds, N (vary M), M (vary N).
QGroupBox* SweepDialog::buildDataBox(const SweepParams& initial)
{
    auto* source = new QGroupBox(tr("Data"), this);
    auto* sf = new QFormLayout(source);
    m_current = new QRadioButton(tr("Current queries and keys (selection and mechanism options)"), source);
    m_synth = new QRadioButton(tr("Synthetic data"), source);
    sf->addRow(m_current);
    sf->addRow(m_synth);
    m_kind = new QComboBox(source);
    m_kind->addItems(qNames(analysis::synth_kinds()));
    m_kind->setCurrentText(initial.synthKind);
    m_d = spinBox(source, 1, 4096, initial.d);
    m_seeds = spinBox(source, 1, 1000, initial.seeds);
    m_n = spinBox(source, 1, 1 << 20, initial.n);
    m_blocks = spinBox(source, 1, 1 << 16, initial.blocks, tr("MHLA blocks M of the synthetic tokens (vary N)"));
    sf->addRow(tr("Kind"), labelledRow(source, m_kind, {{tr("d"), m_d}, {tr("seeds"), m_seeds}, {tr("N (vary M)"), m_n}, {tr("M (vary N)"), m_blocks}}));
    return source;
}

// What varies and over which values, how loaded data are subsampled, heads, mechanisms and the metric shown.
QGroupBox* SweepDialog::buildSweepBox(const SweepParams& initial)
{
    auto* sweep = new QGroupBox(tr("Sweep"), this);
    auto* wf = new QFormLayout(sweep);
    m_vary = comboBox(sweep, {{tr("sequence length N"), QStringLiteral("n")}, {tr("block count M (block-grid side for grid data)"), QStringLiteral("m")}});
    m_vary->setCurrentIndex(initial.vary == QLatin1Char('m') ? 1 : 0);
    wf->addRow(tr("&Vary"), m_vary);
    m_values = new QLineEdit(initial.values, sweep);
    m_values->setPlaceholderText(QStringLiteral("64,128,256,512"));
    m_values->setToolTip(tr("Comma list of N (tokens) or M (blocks; B for a B x B block grid on grid data)"));
    wf->addRow(tr("Va&lues"), m_values);
    m_subsample = new QComboBox(sweep);
    m_subsample->addItems(qNames(analysis::subsample_names()));
    m_subsample->setCurrentText(initial.subsample);
    m_subsample->setToolTip(tr("first: the first N tokens; random: draws of N tokens; crop: a centred sub-grid of grid data"));
    m_draws = spinBox(sweep, 1, 1000, initial.draws);
    m_seed = spinBox(sweep, 0, 1 << 30, static_cast<int>(initial.seed));
    wf->addRow(tr("&Subsample"), labelledRow(sweep, m_subsample, {{tr("draws"), m_draws}, {tr("seed"), m_seed}}));
    m_heads = comboBox(sweep, {{tr("current head"), false}, {tr("all heads (band = spread)"), true}});
    m_heads->setCurrentIndex(initial.allHeads ? 1 : 0);
    wf->addRow(tr("&Heads"), m_heads);
    auto* mechRow = new QHBoxLayout;
    for (const QString& name : qNames(attention::mechanism_names())) {
        auto* box = new QCheckBox(name, sweep);
        box->setChecked(initial.mechanisms.contains(name));
        mechRow->addWidget(box);
        m_mech << box;
    }
    wf->addRow(tr("Mechanisms"), mechRow);
    m_metric = new QComboBox(sweep);
    m_metric->addItems(qNames(analysis::sweep_metric_names()));
    m_metric->setCurrentText(initial.metric);
    wf->addRow(tr("Show &metric"), m_metric);
    return sweep;
}

SweepParams SweepDialog::params() const
{
    SweepParams p;
    p.synthetic = m_synth->isChecked();
    p.synthKind = m_kind->currentText();
    p.d = m_d->value();
    p.seeds = m_seeds->value();
    p.n = m_n->value();
    p.blocks = m_blocks->value();
    p.vary = m_vary->currentData().toString().at(0);
    p.values = m_values->text().trimmed();
    p.subsample = m_subsample->currentText();
    p.draws = m_draws->value();
    p.seed = m_seed->value();
    p.allHeads = m_heads->currentData().toBool();
    p.mechanisms.clear();
    for (const QCheckBox* box : m_mech)
        if (box->isChecked())
            p.mechanisms << box->text();
    p.metric = m_metric->currentText();
    return p;
}

void SweepDialog::updateEnabled()
{
    const bool synth = m_synth->isChecked();
    const bool varyN = m_vary->currentIndex() == 0;
    m_kind->setEnabled(synth);
    m_d->setEnabled(synth);
    m_seeds->setEnabled(synth);
    m_n->setEnabled(synth && !varyN);
    m_blocks->setEnabled(synth && varyN);
    m_subsample->setEnabled(!synth && varyN);
    m_draws->setEnabled(!synth && varyN && m_subsample->currentText() == QLatin1String("random"));
    m_heads->setEnabled(!synth);
    m_values->setPlaceholderText(varyN ? QStringLiteral("64,128,256,512") : QStringLiteral("1,2,4,8,16"));
}

void SweepDialog::checkAndAccept()
{
    // The checks that need no data (the core validates every point against the data when it runs).
    SweepParams p = params();
    if (!m_draws->isEnabled())
        p.draws = 1;
    QString problem;
    try {
        const analysis::TensorSource dummy;
        sweepSpec(p, &dummy, {});
    } catch (const std::exception& e) {
        problem = QString::fromStdString(e.what());
    }
    if (!problem.isEmpty()) {
        m_problem->setText(problem);
        m_problem->show();
        return;
    }
    accept();
}

}  // namespace attnscope::widgets
