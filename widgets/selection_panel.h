#pragma once
// The selection panel: which N x d slice of the queries' (and keys') tensors is analysed, exactly the
// command line's --layout / --at / --prefix-tokens (docs/cli.md "Axis selection"), plus the token grid used
// for display (and as the default grid of MHLA's grid blocks).
//
// One spin box per index axis of the layout, labelled by its letter (h head, b batch, l layer), with
// the range of the queries' shape. The token grid and prefix tokens are guessed from the file's
// `grid` / `prefix_tokens` attributes or from N (N = s^2: s x s; N = s^2 + 1: one prefix token) and stay editable.
#include <QJsonObject>
#include <QMap>
#include <QWidget>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "data_browser.h"
#include "io/selection.h"

class QComboBox;
class QLineEdit;
class QSpinBox;
class QLabel;
class QFormLayout;

namespace attnscope::widgets {

class SelectionPanel : public QWidget {
    Q_OBJECT
public:
    explicit SelectionPanel(QWidget* parent = nullptr);

    // The queries' tensor (null: nothing assigned). A tensor of another shape than before gets fresh
    // guesses for the token grid and prefix tokens; the same shape keeps the user's values.
    void setTensor(const std::optional<TensorEntry>& queries);

    io::AxisSelection selection() const;
    QString layout() const;                              // resolved (default by rank when empty)
    std::vector<Eigen::Index> tokenGrid() const;         // empty: 1-D tokens or an unparsable grid
    // True when the token grid was guessed from N (the file has no grid attribute): it is for display, and
    // MHLA keeps the command line's 1-D blocks (docs/cli.md: only a file's grid, or the user's, sets grid blocks).
    bool gridGuessed() const { return m_gridGuessed; }
    qint64 tokens() const;                               // N after prefix tokens (-1: unknown)
    qint64 features() const;                             // d, the length of the 'd' axis (-1: unknown)
    QString problem() const;                             // why the selection does not fit ("" when it does)
    QString summary() const;                             // "h=2, b=0" for titles

    // The axis stepped by PgUp/PgDn: 'h' when present, else the first index axis; 0 when none.
    QChar stepAxis() const;
    // Adds delta to the index on `axis` (clamped). False when there is no such axis or it did not move.
    bool step(QChar axis, int delta);

    // The layers of per-layer datasets of the queries' file (analysis::layer_tensors), the current one
    // selected; fewer than two hide the layer row. Choosing a layer emits layerRequested (the window
    // assigns that layer's tensors).
    void setLayers(const QList<int>& layers, int current);
    int currentLayer() const;                             // -1 without per-layer datasets
    // Steps the layer: the layout's 'l' axis, else the per-layer datasets. False when it cannot move.
    bool stepLayer(int delta);
    // The key/value head the query head reads (docs/maths.md 1.7), shown next to the head: "5 of 8 (kv 2
    // of 4)" when keys have fewer heads. kvHead < 0: none.
    void setHeadPairing(int kvHead, int kvHeads, int heads);
    void setIndex(QChar axis, int value);
    int index(QChar axis) const;

    QJsonObject saveState() const;
    void restoreState(const QJsonObject& state);          // emits changed() once

signals:
    void changed();
    void layerRequested(int layer);

private:
    void rebuildAxes();
    void guessGridAndPrefix();
    void updateInfo();

    std::optional<TensorEntry> m_tensor;
    QVector<qint64> m_shape;
    QMap<QChar, int> m_at;             // remembered per letter across rebuilds
    QMap<QChar, QSpinBox*> m_spins;
    QLineEdit* m_layout = nullptr;
    QWidget* m_axesBox = nullptr;
    QFormLayout* m_axesForm = nullptr;
    QSpinBox* m_prefix = nullptr;
    QLineEdit* m_grid = nullptr;
    QLabel* m_info = nullptr;
    QLabel* m_problem = nullptr;
    bool m_restoring = false;
    QString m_origin;                  // where the grid and prefix tokens came from (the file, or a guess)
    QComboBox* m_layer = nullptr;
    QWidget* m_layerRow = nullptr;
    int m_kvHead = -1, m_kvHeads = 0, m_heads = 0;
    bool m_gridGuessed = false;
};

}  // namespace attnscope::widgets
