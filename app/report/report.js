// The page of `attnscope report` (app/cmd_report.cpp): draws window.ATTNSCOPE_REPORT (data.js) with Vega-Lite.
// Overview grids per input (layer x head, one per mechanism, a measure chosen in the selector; a click opens the
// head), the aggregate table and the depth plot per input, and per head its maps (PNG), spectra, entropy per
// query, semiseparable profile, numbers and the command that reproduces them. Per-head charts are drawn when
// they scroll into view, so a page of many heads opens at once.
(function () {
  "use strict";
  const R = window.ATTNSCOPE_REPORT;
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  };
  const fmt = (v) => {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : v.toFixed(4).replace(/\.?0+$/, "");
  };
  const COLORS = { softmax: "#1f77b4", linear: "#d62728", mhla: "#2ca02c", decay: "#9467bd", gated: "#8c564b" };
  const colorScale = (names) => ({ domain: names, range: names.map((n) => COLORS[n] || "#7f7f7f") });
  const embedOpts = { actions: false, renderer: "svg" };
  const failures = [];
  const embed = (target, spec) =>
    vegaEmbed(target, spec, embedOpts).catch((err) => {
      failures.push(String(err));
      target.append(el("p", { class: "error" }, "chart failed: " + err));
      return null;
    });

  const measureSelect = document.getElementById("measure");
  for (const m of R.measures) measureSelect.append(el("option", { value: m.key }, m.label));
  measureSelect.value = R.measures[0].key;

  function overviewSpec(input, key) {
    const rows = [];
    for (const u of input.units)
      for (const m of u.mechanisms)
        if (m[key] !== null && m[key] !== undefined)
          rows.push({ layer: u.layer, head: u.head, mechanism: m.mechanism, value: m[key], href: "#" + u.anchor });
    const label = R.measures.find((m) => m.key === key).label;
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      data: { values: rows },
      facet: { column: { field: "mechanism", type: "nominal", sort: input.mechanisms, title: null } },
      spec: {
        width: Math.min(360, 34 * input.heads.length),
        height: Math.min(360, 34 * input.layers.length),
        mark: { type: "rect", cursor: "pointer" },
        encoding: {
          x: { field: "head", type: "ordinal", title: "head" },
          y: { field: "layer", type: "ordinal", title: "layer" },
          color: { field: "value", type: "quantitative", title: label, scale: { scheme: "viridis" } },
          tooltip: [
            { field: "mechanism" }, { field: "layer" }, { field: "head" },
            { field: "value", title: label, format: ".4~g" },
          ],
        },
      },
      resolve: { scale: { color: "shared" } },
    };
  }

  function drawOverviews() {
    const key = measureSelect.value;
    for (const input of R.inputs) {
      const target = document.getElementById("overview-" + input.name);
      target.replaceChildren();
      // A click on a cell opens its head (its section's anchor).
      embed(target, overviewSpec(input, key)).then((res) => {
        if (res) res.view.addEventListener("click", (event, item) => {
          if (item && item.datum && item.datum.href) location.hash = item.datum.href;
        });
      });
    }
  }

  function aggregateTable(input) {
    const rows = (input.aggregate && input.aggregate.mechanisms) || [];
    if (!rows.length) return el("p", {}, "No statistics over heads (one unit).");
    const order = new Map(R.aggregate_metrics.map((m, i) => [m, i]));
    const kept = rows.filter((r) => order.has(r.metric))
      .sort((a, b) => order.get(a.metric) - order.get(b.metric) || input.mechanisms.indexOf(a.mechanism) - input.mechanisms.indexOf(b.mechanism));
    const t = el("table", { class: "numbers" });
    t.append(el("tr", {}, ...["metric", "mechanism", "units", "mean", "95% interval of the mean", "agree", "method"].map((h) => el("th", {}, h))));
    for (const row of kept) {
      const ci = row.ci_low !== undefined && row.ci_low !== null ? "[" + fmt(row.ci_low) + ", " + fmt(row.ci_high) + "]" : "–";
      t.append(el("tr", {}, el("td", {}, row.metric), el("td", {}, row.mechanism), el("td", {}, fmt(row.n)),
        el("td", {}, fmt(row.mean)), el("td", {}, ci), el("td", {}, fmt(row.agree)), el("td", {}, row.ci_method || "")));
    }
    return t;
  }

  function depthSpec(input) {
    const rows = [];
    for (const d of input.depth.depth)
      for (const r of d.results)
        rows.push({ depth: d.depth, mechanism: r.mechanism, effective_rank: r.effective_rank,
                    residual_to_uniform: r.residual_to_uniform });
    const names = [...new Set(rows.map((r) => r.mechanism))];
    const line = (field, title) => ({
      width: 300, height: 180,
      mark: { type: "line", point: true },
      encoding: {
        x: { field: "depth", type: "quantitative", title: "depth L (layers multiplied)", axis: { tickMinStep: 1 } },
        y: { field, type: "quantitative", title },
        color: { field: "mechanism", type: "nominal", scale: colorScale(names) },
        tooltip: [{ field: "mechanism" }, { field: "depth" }, { field, format: ".4~g" }],
      },
    });
    return { $schema: "https://vega.github.io/schema/vega-lite/v5.json", data: { values: rows },
             hconcat: [line("effective_rank", "effective rank of P_L"), line("residual_to_uniform", "residual to uniform")] };
  }

  function headCharts(input, u, target) {
    const names = u.mechanisms.map((m) => m.mechanism);
    const spectrum = [], entropy = [], profile = [];
    for (const m of u.mechanisms) {
      (m.singular_values || []).forEach((s, i) => { if (s > 0) spectrum.push({ mechanism: m.mechanism, index: i + 1, sigma: s }); });
      (m.row_entropy || []).forEach((h, i) => { if (h !== null) entropy.push({ mechanism: m.mechanism, query: i, entropy: h }); });
      (m.past_profile || []).forEach((p) => profile.push({ mechanism: m.mechanism, split: p.h, rank: p.rank }));
    }
    const chart = (values, x, y, xTitle, yTitle, extra) => ({
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      width: 260, height: 170, data: { values },
      mark: { type: "line", point: values.length < 80, strokeWidth: 1.5 },
      encoding: Object.assign({
        x: { field: x, type: "quantitative", title: xTitle },
        y: { field: y, type: "quantitative", title: yTitle },
        color: { field: "mechanism", type: "nominal", scale: colorScale(names), legend: null },
        tooltip: [{ field: "mechanism" }, { field: x }, { field: y, format: ".4~g" }],
      }, extra || {}),
    });
    const boxes = [];
    if (spectrum.length) {
      const s = chart(spectrum, "index", "sigma", "index i", "singular value σ_i (log)");
      s.encoding.y.scale = { type: "log" };
      boxes.push(["Singular spectra", s]);
    }
    if (entropy.length) boxes.push(["Entropy per query", chart(entropy, "query", "entropy", "query", "row entropy (nats)")]);
    if (profile.length) boxes.push(["Semiseparable profile", chart(profile, "split", "rank", "split h", "rank of A[h:N, 0:h]")]);
    for (const [title, spec] of boxes) {
      const box = el("div", { class: "chart" }, el("div", { class: "chart-title" }, title));
      const host = el("div");
      box.append(host);
      target.append(box);
      embed(host, spec);
    }
  }

  function numbersTable(input, u) {
    const t = el("table", { class: "numbers" });
    t.append(el("tr", {}, el("th", {}, "measure"), ...u.mechanisms.map((m) => el("th", {}, m.mechanism))));
    for (const meas of R.table) {
      const cells = u.mechanisms.map((m) => {
        let text = fmt(m[meas.key]);
        if (m.bounds && m.bounds[meas.key] !== undefined) text += " (≤ " + m.bounds[meas.key] + " by construction)";
        return el("td", {}, text);
      });
      t.append(el("tr", {}, el("td", {}, meas.label), ...cells));
    }
    return t;
  }

  function headSection(input, u) {
    const s = el("section", { class: "head", id: u.anchor });
    s.append(el("h3", {}, `${input.name} — layer ${u.layer}, head ${u.head}`));
    const row = el("div", { class: "head-row" });
    if (u.figure) row.append(el("img", { class: "maps", src: u.figure, alt: `attention maps, layer ${u.layer} head ${u.head}` }));
    else if (R.maps_missing) row.append(el("p", { class: "maps-missing" }, R.maps_missing));
    row.append(numbersTable(input, u));
    s.append(row);
    const charts = el("div", { class: "charts" });
    s.append(charts);
    s.append(el("pre", { class: "command" }, u.command));
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) {
        observer.disconnect();
        headCharts(input, u, charts);
      }
    }, { rootMargin: "400px" });
    observer.observe(s);
    return s;
  }

  function build() {
    const main = document.getElementById("inputs");
    for (const input of R.inputs) {
      const sec = el("section", { class: "input", id: "input-" + input.name });
      sec.append(el("h2", {}, input.name));
      sec.append(el("p", { class: "facts" },
        `${input.file} (SHA-256 ${input.sha256.slice(0, 16)}…): ${input.layers.length} layer(s) x ${input.heads.length} head(s), ` +
        `N = ${input.n}, d = ${input.d}${input.causal ? ", causal" : ""}. ${input.sentence}`));
      sec.append(el("p", { class: "command-line" }, "Reproduce every number of this input: ", el("code", {}, input.batch_command)));
      const how = el("details", { class: "how" }, el("summary", {}, "What was measured, with which options"));
      if (input.job) how.append(el("p", {}, "The job (docs/batch.md):"), el("pre", { class: "command" }, input.job));
      if (input.defaults_from_file && Object.keys(input.defaults_from_file).length)
        how.append(el("p", {}, "From the file's attributes: " +
          Object.entries(input.defaults_from_file).map(([k, v]) => k + " = " + JSON.stringify(v)).join(", ")));
      const pt = el("table", { class: "numbers" });
      pt.append(el("tr", {}, el("th", {}, "mechanism"), el("th", { style: "text-align:left" }, "parameters")));
      for (const [mech, p] of Object.entries(input.params || {}))
        pt.append(el("tr", {}, el("td", {}, mech), el("td", { style: "text-align:left" },
          Object.entries(p || {}).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join("  "))));
      how.append(pt);
      sec.append(how);
      sec.append(el("h3", {}, "Overview (click a cell for its head)"));
      sec.append(el("div", { class: "overview", id: "overview-" + input.name }));
      sec.append(el("h3", {}, "Over the heads: means with 95% intervals (attnscope aggregate)"));
      sec.append(aggregateTable(input));
      if (input.depth && input.depth.depth && input.depth.depth.length > 1) {
        sec.append(el("h3", {}, "Collapse with depth (attnscope depth, products of the layers' mean attention)"));
        const d = el("div", { class: "depth" });
        sec.append(d);
        embed(d, depthSpec(input));
      }
      sec.append(el("h3", {}, "Heads"));
      for (const u of input.units) sec.append(headSection(input, u));
      main.append(sec);
    }
    measureSelect.addEventListener("change", drawOverviews);
    drawOverviews();
    window.ATTNSCOPE_REPORT_FAILURES = failures;
  }
  build();
})();
