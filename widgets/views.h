#pragma once
// The result views. Each is a ResultView (result_view.h); construction is all the main window needs.
//
//  MapsView      softmax | linear | MHLA heatmaps side by side (one QCustomPlot, linked zoom/pan), a
//                shared colour scale (linear or log, perceptual colour maps), colour bar with label,
//                hover read-out (query, key, value, grid coordinates), MHLA block boundaries, a
//                difference mode (e.g. MHLA - softmax) and reduced images when zoomed out (large N).
//                Clicking a row emits querySelected(row).
//  QueryView     the selected query's distribution over keys under each mechanism; for grid data a
//                heatmap over the token grid per mechanism with the query marked (the MHLA paper's fig. 3).
//  SpectrumView  normalised singular values (log scale) per mechanism, rank tolerance line, ranks in the
//                legend, optional cumulative energy, the rank against the relative tolerance (rank_at_rtol), or the
//                semiseparable profile (the past block's rank at every split, with d).
//  EntropyView   row-entropy histograms overlaid per mechanism, and entropy per query (over the grid for grid data).
//  MixingView    the M x M mixing matrix as a heatmap with its rank and singular values.
//  MetricsView   a table of every metric per mechanism; Copy as CSV.
//  HeadsView     every head of the layer as small maps per mechanism (heads_view.h: the window computes its pages).
//  DepthView     collapse with depth: residual to uniform and effective rank of the layers' products against depth
//                per mechanism, for alpha and the heads' mean or one head (depth_view.h: the window computes it).
#include "result_view.h"

namespace attnscope::widgets {

ResultView* createMapsView(QWidget* parent = nullptr);
ResultView* createQueryView(QWidget* parent = nullptr);
ResultView* createSpectrumView(QWidget* parent = nullptr);
ResultView* createEntropyView(QWidget* parent = nullptr);
ResultView* createMixingView(QWidget* parent = nullptr);
ResultView* createMetricsView(QWidget* parent = nullptr);

// All eight, in the order above.
QList<ResultView*> createAllViews(QWidget* parent = nullptr);

// CSV of every metric per mechanism (the MetricsView's "Copy as CSV" and File > Export metrics).
QString metricsCsv(const analysis::ExploreResult& result);

}  // namespace attnscope::widgets
