// The sweep dialog, its parameters (JSON for sessions), the core SweepSpec they make and the core's refusals
// in the app's words; see sweep_dialog.h.
#include "sweep_dialog.h"

#include "analysis/sweep_check.h"

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
#include <QRegularExpression>
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

}  // namespace

QStringList defaultMechanismNames() { return qNames(attention::mechanism_name_list(attention::default_mechanisms())); }

namespace {

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
    o[QStringLiteral("inputs")] = allInputs ? QStringLiteral("all") : QStringLiteral("current");
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
    p.allInputs = o.value(QStringLiteral("inputs")).toString() == QLatin1String("all");
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
        if (p.allInputs && !current->q_ref.text.empty()) {
            // Every index of the other index axes is a unit (the core's `--at b=all`); the points pool them.
            const std::vector<char> axes = analysis::input_axes(*current);
            if (axes.empty())
                throw std::invalid_argument("the queries hold one input (no index axis besides heads and layers): "
                                            "choose the current input");
            for (const char axis : axes) {
                spec.inputs[0].selection.at.erase(axis);
                spec.inputs[0].selection.all.insert(axis);
            }
        }
    }
    return spec;
}

QString sweepProblemText(const QString& coreMessage)
{
    struct Rule {
        const char* pattern;
        const char* replacement;
    };
    // Whole messages first, then pieces; anything left that looks like a flag loses its dashes.
    static const Rule rules[] = {
        {R"(a sweep needs either inputs \(--q/--k\) or --synth KIND)", "choose the current queries and keys or synthetic data"},
        {R"(--vary takes n=LIST or m=LIST)", "vary N or M"},
        {R"(--subsample crop needs grid data \(--grid [^)]*\))",
         "centred crops need grid data: set the token grid (Selection dock) and grid blocks (Mechanisms dock)"},
        {R"(--subsample crop needs --token-order raster)", "centred crops need the raster token order (Mechanisms dock)"},
        {R"(--draws needs --subsample random)", "several draws need random subsets"},
        {R"(--mechanism lists no mechanism)", "choose at least one mechanism"},
        {R"(--d and --seeds must be at least 1)", "synthetic d and seeds must be at least 1"},
        {R"(--vary m with --synth needs --n)", "synthetic data varied over M need a number of tokens N"},
        {R"(--vary n with --synth needs a list of sizes, e\.g\. --vary n=)", "give a list of sizes N, e.g. "},
        {R"(--vary m needs a list of block counts, e\.g\. --vary m=)", "give a list of block counts M, e.g. "},
        {R"(--synth with grid blocks)", "synthetic data with grid blocks"},
        {R"(; use --subsample crop)", "; choose the subsample \"crop\" (centred crops) for smaller N"},
        {R"(^--subsample crop: )", ""},
        {R"(--subsample crop)", "centred crops"},
        {R"(--subsample random)", "random subsets"},
        {R"(--vary n=(\d+))", "N = \\1"},
        {R"(--vary m=(\d+))", "M = \\1"},
        {R"(\b([NM])=(\d+))", "\\1 = \\2"},
        {R"(the input has (\d+) tokens)", "the selection has \\1 tokens"},
        {R"(--q )", "queries "},
        {R"(--k )", "keys "},
        {R"(--v )", "values "},
        {R"(--max-memory)", "the memory limit"},
        {R"(--at )", "index "},
        {R"(--head )", "head "},
        {R"(--([a-z][a-z0-9]*)-([a-z0-9-]+))", "\\1 \\2"},
        {R"(--([a-z][a-z0-9]*))", "\\1"},
    };
    QString text = coreMessage;
    for (const Rule& r : rules)
        text.replace(QRegularExpression(QString::fromLatin1(r.pattern)), QString::fromLatin1(r.replacement));
    text.replace(QLatin1String("--"), QString());
    if (!text.isEmpty())
        text[0] = text[0].toUpper();
    return text;
}

SweepDialog::SweepDialog(const SweepParams& initial, SweepDataContext data, QWidget* parent)
    : QDialog(parent), m_data(std::move(data))
{
    build(initial);
    fitToData(true);
}

SweepDialog::SweepDialog(const SweepParams& initial, bool haveData, QWidget* parent) : QDialog(parent)
{
    m_data.haveData = haveData;
    build(initial);
    validate();
}

void SweepDialog::build(const SweepParams& initial)
{
    setWindowTitle(tr("Sweep: rank and entropy against N or M"));
    auto* outer = new QVBoxLayout(this);
    outer->addWidget(buildDataBox(initial));
    outer->addWidget(buildSweepBox(initial));

    m_problem = problemLabel(this, QStringLiteral("#a00000"));
    m_problem->setObjectName(QStringLiteral("problem"));
    outer->addWidget(m_problem);
    outer->addStretch(1);   // room left by a hint or problem that goes stays below the boxes

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_run = buttons->button(QDialogButtonBox::Ok);
    m_run->setText(tr("Run"));
    connect(buttons, &QDialogButtonBox::accepted, this, &SweepDialog::checkAndAccept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    outer->addWidget(buttons);

    if (!m_data.haveData) {
        m_current->setEnabled(false);
        m_current->setToolTip(tr("Open data and assign queries and keys first"));
    }
    (initial.synthetic || !m_data.haveData ? m_synth : m_current)->setChecked(true);

    m_check.setSingleShot(true);
    m_check.setInterval(150);
    connect(&m_check, &QTimer::timeout, this, [this] { validate(); });
    auto later = [this] { m_check.start(); };
    for (QRadioButton* r : {m_current, m_synth})
        connect(r, &QRadioButton::toggled, this, [this](bool on) {
            if (on)
                kindChanged();
        });
    // N values are no M values: switching what varies puts in the proposal for the new kind.
    connect(m_vary, &QComboBox::currentIndexChanged, this, [this] {
        updateEnabled();
        validate();
        if (!m_proposed.empty())
            useProposal();
    });
    connect(m_subsample, &QComboBox::currentIndexChanged, this, &SweepDialog::kindChanged);
    connect(m_values, &QLineEdit::textEdited, this, later);
    for (QSpinBox* box : {m_d, m_seeds, m_n, m_blocks, m_draws, m_seed})
        connect(box, &QSpinBox::valueChanged, this, later);
    connect(m_kind, &QComboBox::currentIndexChanged, this, later);
    connect(m_heads, &QComboBox::currentIndexChanged, this, later);
    for (QCheckBox* box : m_mech)
        connect(box, &QCheckBox::toggled, this, later);
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
    m_vary->setObjectName(QStringLiteral("vary"));
    wf->addRow(tr("&Vary"), m_vary);
    m_values = new QLineEdit(initial.values, sweep);
    m_values->setObjectName(QStringLiteral("values"));
    m_values->setPlaceholderText(QStringLiteral("64,128,256,512"));
    m_values->setToolTip(tr("Comma list of N (tokens) or M (blocks; B for a B x B block grid on grid data)"));
    m_propose = new QPushButton(tr("&Fit to data"), sweep);
    m_propose->setToolTip(tr("Values that fit the data: the sizes listed below"));
    connect(m_propose, &QPushButton::clicked, this, &SweepDialog::useProposal);
    addFieldWithButton(wf, sweep, tr("Va&lues"), m_values, m_propose);
    m_hint = new QLabel(sweep);
    m_hint->setObjectName(QStringLiteral("hint"));
    m_hint->setWordWrap(true);
    m_hint->setStyleSheet(QStringLiteral("color: #555555;"));
    wf->addRow(QString(), m_hint);
    m_subsample = new QComboBox(sweep);
    m_subsample->addItems(qNames(analysis::subsample_names()));
    m_subsample->setCurrentText(initial.subsample);
    m_subsample->setToolTip(tr("first: the first N tokens; random: draws of N tokens; crop: a centred sub-grid of grid data"));
    m_draws = spinBox(sweep, 1, 1000, initial.draws);
    m_seed = spinBox(sweep, 0, 1 << 30, static_cast<int>(initial.seed));
    auto* subsampleLabel = new QLabel(tr("&Subsample"), sweep);
    subsampleLabel->setBuddy(m_subsample);
    wf->addRow(subsampleLabel, labelledRow(sweep, m_subsample, {{tr("draws"), m_draws}, {tr("seed"), m_seed}}));
    m_heads = comboBox(sweep, {{tr("current head"), false}, {tr("all heads (band = 95% interval)"), true}});
    m_heads->setCurrentIndex(initial.allHeads ? 1 : 0);
    wf->addRow(tr("&Heads"), m_heads);
    m_inputs = comboBox(sweep, {{tr("current input"), false}, {tr("every input of the file (band = 95% interval)"), true}});
    m_inputs->setCurrentIndex(initial.allInputs ? 1 : 0);
    m_inputs->setObjectName(QStringLiteral("inputs"));
    m_inputs->setToolTip(tr("Every index of the queries' other index axes (e.g. b: a batch of inputs) is a unit; "
                            "the curves show their mean and its 95% interval"));
    wf->addRow(tr("&Inputs"), m_inputs);
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
    p.allInputs = m_inputs->currentData().toBool();
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
    m_inputs->setEnabled(!synth);
    m_values->setPlaceholderText(varyN ? QStringLiteral("64,128,256,512") : QStringLiteral("1,2,4,8,16"));
}

// What is swept, or on which data, changed: values that no longer fit are replaced by ones that do.
void SweepDialog::kindChanged()
{
    updateEnabled();
    fitToData(false);
}

SweepParams SweepDialog::effectiveParams() const
{
    SweepParams p = params();
    if (!m_draws->isEnabled())
        p.draws = 1;
    return p;
}

analysis::SweepSpec SweepDialog::specOf(const SweepParams& p, bool* checkable) const
{
    *checkable = true;
    if (p.synthetic)
        return sweepSpec(p, nullptr, m_data.options);
    if (!m_data.haveData)
        return sweepSpec(p, nullptr, m_data.options);   // throws: nothing assigned
    if (!m_data.source) {
        if (!m_data.problem.isEmpty())
            throw std::invalid_argument(m_data.problem.toStdString());
        // No data to check against (the dialog was not given them): what needs no data only.
        *checkable = false;
        const analysis::TensorSource unknown;
        return sweepSpec(p, &unknown, m_data.options);
    }
    return sweepSpec(p, &*m_data.source, m_data.options);
}

QString SweepDialog::validate()
{
    m_check.stop();
    const SweepParams p = effectiveParams();
    // What fits the data, whatever the values typed.
    m_proposed.clear();
    QString hint;
    try {
        SweepParams probe = p;
        probe.values = QStringLiteral("1");
        bool checkable = false;
        const analysis::SweepSpec spec = specOf(probe, &checkable);
        if (checkable) {
            const analysis::SweepValueChoice choice = analysis::sweep_value_choice(spec);
            m_proposed = choice.proposed;
            auto list = [](const std::vector<Eigen::Index>& v) {
                QStringList parts;
                for (Eigen::Index x : v)
                    parts << QString::number(x);
                return parts.join(QStringLiteral(", "));
            };
            const QString grid = sizesText(choice.grid, QStringLiteral("\u00d7"));
            if (p.vary == QLatin1Char('m')) {
                if (!choice.grid.empty())
                    hint = tr("Block-grid sides B (B\u00d7B blocks) that divide the %1 grid: %2").arg(grid, list(choice.valid));
                else if (choice.tokens > 0)
                    hint = tr("M from 1 to %1 tokens; equal blocks: %2 ...").arg(choice.tokens).arg(list(choice.proposed));
            } else if (p.synthetic) {
                hint = tr("Synthetic data: any N, e.g. %1").arg(list(choice.proposed));
            } else if (p.subsample == QLatin1String("crop")) {
                hint = choice.valid.empty() ? QString()
                                            : tr("Centred crops of the %1 grid that hold whole blocks: N = %2").arg(grid, list(choice.valid));
            } else if (!choice.grid.empty()) {
                hint = tr("With grid blocks only all %1 tokens fit: choose the subsample \"crop\" for smaller N").arg(choice.tokens);
            } else if (choice.tokens > 0) {
                hint = tr("N from 1 to %1 (the selection's tokens)").arg(choice.tokens);
            }
        }
    } catch (const std::exception&) {
        // The problem below says what is wrong.
    }
    m_hint->setText(hint);
    m_hint->setVisible(!hint.isEmpty());
    m_propose->setEnabled(!m_proposed.empty());

    QString problem;
    try {
        bool checkable = false;
        const analysis::SweepSpec spec = specOf(p, &checkable);
        if (checkable)   // headers only; the mechanisms at every point as the run builds them
            analysis::check_sweep_mechanisms(analysis::plan_sweep(spec));
    } catch (const std::exception& e) {
        problem = sweepProblemText(QString::fromStdString(e.what()));
    }
    m_problemText = problem;
    m_problem->setText(problem);
    m_problem->setVisible(!problem.isEmpty());
    m_run->setEnabled(problem.isEmpty());
    return problem;
}

bool SweepDialog::canRun() const { return m_run->isEnabled(); }

QString SweepDialog::hint() const { return m_hint->isHidden() ? QString() : m_hint->text(); }

// Values that do not fit are replaced by proposed ones; with `preferCrop` (the dialog opening on grid data
// over N), first / random subsets that cannot be smaller than the grid become centred crops.
void SweepDialog::fitToData(bool preferCrop)
{
    if (validate().isEmpty())
        return;
    if (preferCrop && !m_synth->isChecked() && m_vary->currentIndex() == 0 && m_subsample->currentText() != QLatin1String("crop")) {
        const QSignalBlocker blocker(m_subsample);
        const QString before = m_subsample->currentText();
        m_subsample->setCurrentText(QStringLiteral("crop"));
        validate();
        if (m_proposed.size() < 2) {   // crops do not help here
            m_subsample->setCurrentText(before);
            validate();
        }
        updateEnabled();
    }
    if (!m_proposed.empty())
        useProposal();
}

void SweepDialog::useProposal()
{
    QStringList parts;
    for (Eigen::Index v : m_proposed)
        parts << QString::number(v);
    if (parts.isEmpty())
        return;
    m_values->setText(parts.join(QLatin1Char(',')));
    validate();
}

void SweepDialog::checkAndAccept()
{
    if (!validate().isEmpty())
        return;
    accept();
}

}  // namespace attnscope::widgets
