// The page of `attnscope report` (app/cmd_report.cpp): draws window.ATTNSCOPE_REPORT (data.js) with Vega-Lite.
// Overview grids per input (layer x head, one per mechanism, a measure chosen in the selector; a click opens the
// head), the aggregate table and the depth plot per input, and per head its maps (PNG), spectra, entropy per
// query, semiseparable profile, numbers and the command that reproduces them. Per-head charts are drawn when
// they scroll into view, so a page of many heads opens at once. An input paged by layer (its units name their
// "page") keeps its overview here and its heads on one page per layer: such a page sets window.ATTNSCOPE_LAYER
// (DIR/<name>-layer-<L>.js) beside data.js and this script draws its heads, with links to the overview and to the
// layers before and after it.
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
  // Each mechanism's colour and dash. Lines of several mechanisms often coincide (softmax equal to linear, MHLA
  // with M = 1 equal to linear, equal ranks in a profile): every chart draws them in the order given, each one
  // thinner than those under it (WIDTHS), so a line on top of another leaves the one below visible on both sides
  // and in its dash gaps.
  const STYLE = {
    softmax: { color: "#1f77b4", dash: [], shape: "circle" },
    linear: { color: "#d62728", dash: [7, 3], shape: "square" },
    mhla: { color: "#2ca02c", dash: [2, 2], shape: "triangle-up" },
    decay: { color: "#9467bd", dash: [9, 3, 2, 3], shape: "diamond" },
    gated: { color: "#8c564b", dash: [4, 2, 1, 2], shape: "cross" },
    cosformer: { color: "#e377c2", dash: [12, 4], shape: "triangle-down" },
  };
  const WIDTHS = [3.2, 2.2, 1.1, 1, 0.9, 0.8];
  const styleOf = (n) => STYLE[n] || { color: "#7f7f7f", dash: [1, 1], shape: "circle" };
  const labelOf = (n) => (R.mechanism_labels && R.mechanism_labels[n]) || n;
  const colorScale = (names) => ({ domain: names, range: names.map((n) => styleOf(n).color) });
  // Lines of `values` (rows with a "mechanism" field), one layer per mechanism of `names`, drawn in that order;
  // with points, each mechanism's own hollow shape, smaller on top.
  function mechanismLines(names, values, encoding, withPoints) {
    return {
      data: { values },
      encoding,
      layer: names.map((n, i) => ({
        transform: [{ filter: { field: "mechanism", equal: n } }],
        mark: { type: "line", strokeWidth: WIDTHS[Math.min(i, WIDTHS.length - 1)], strokeDash: styleOf(n).dash,
                point: withPoints ? { shape: styleOf(n).shape, filled: false, size: 70 - 12 * Math.min(i, 4),
                                      strokeWidth: 1.2 } : false },
      })),
    };
  }
  const embedOpts = { actions: false, renderer: "svg" };
  const failures = [];
  const embed = (target, spec) =>
    vegaEmbed(target, spec, embedOpts).catch((err) => {
      failures.push(String(err));
      target.append(el("p", { class: "error" }, "chart failed: " + err));
      return null;
    });

  // The header's legend: the report's mechanisms with their line styles.
  function drawLegend() {
    const names = [];
    for (const input of R.inputs) for (const m of input.mechanisms) if (!names.includes(m)) names.push(m);
    const legend = document.getElementById("legend");
    legend.replaceChildren("Mechanisms: ");
    const svgNS = "http://www.w3.org/2000/svg";
    for (const n of names) {
      const svg = document.createElementNS(svgNS, "svg");
      svg.setAttribute("width", "30"), svg.setAttribute("height", "10");
      const line = document.createElementNS(svgNS, "line");
      for (const [k, v] of Object.entries({ x1: 0, y1: 5, x2: 30, y2: 5, stroke: styleOf(n).color, "stroke-width": 2.2,
                                            "stroke-dasharray": styleOf(n).dash.join(" ") || "none" }))
        line.setAttribute(k, v);
      svg.append(line);
      legend.append(el("span", { style: "color:" + styleOf(n).color }, svg, " " + labelOf(n)));
    }
  }

  // A link to a head: its anchor on this page, or on its layer's page when the input is paged.
  const headHref = (u) => (u.page ? encodeURIComponent(u.page) : "") + "#" + encodeURIComponent(u.anchor);
  const measureSelect = document.getElementById("measure");

  function overviewSpec(input, key) {
    const rows = [];
    for (const u of input.units)
      for (const m of u.mechanisms)
        if (m[key] !== null && m[key] !== undefined)
          rows.push({ layer: u.layer, head: u.head, mechanism: m.mechanism, value: m[key], href: headHref(u) });
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
      // A click on a cell opens its head (its section's anchor, on its layer's page when paged).
      embed(target, overviewSpec(input, key)).then((res) => {
        if (res) res.view.addEventListener("click", (event, item) => {
          if (item && item.datum && item.datum.href) location.assign(item.datum.href);
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
    const line = (field, title) => Object.assign({ width: 300, height: 180 }, mechanismLines(names, rows, {
      x: { field: "depth", type: "quantitative", title: "depth L (layers multiplied)", axis: { tickMinStep: 1 } },
      y: { field, type: "quantitative", title },
      color: { field: "mechanism", type: "nominal", scale: colorScale(names) },
      tooltip: [{ field: "mechanism" }, { field: "depth" }, { field, format: ".4~g" }],
    }, true));
    return { $schema: "https://vega.github.io/schema/vega-lite/v5.json",
             hconcat: [line("effective_rank", "effective rank of P_L"), line("residual_to_uniform", "residual to uniform")] };
  }

  // A token as the maps view shows it: a space as a middle dot, control characters escaped (\n, \t, \xNN).
  function displayToken(t) {
    if (t === undefined || t === null) return "";
    return `‘${[...t].map((c) => c === " " ? "·" : c === "\n" ? "\\n" : c === "\t" ? "\\t"
      : c.charCodeAt(0) < 0x20 ? "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0") : c).join("")}’`;
  }

  function headCharts(input, u, target) {
    const names = u.mechanisms.map((m) => m.mechanism);
    const spectrum = [], entropy = [], profile = [];
    for (const m of u.mechanisms) {
      (m.singular_values || []).forEach((s, i) => { if (s > 0) spectrum.push({ mechanism: m.mechanism, index: i + 1, sigma: s }); });
      (m.row_entropy || []).forEach((h, i) => {
        if (h === null) return;
        const row = { mechanism: m.mechanism, query: i, entropy: h };
        if (input.tokens) row.token = displayToken(input.tokens[i]);   // the file's token of query i
        entropy.push(row);
      });
      (m.past_profile || []).forEach((p) => profile.push({ mechanism: m.mechanism, split: p.h, rank: p.rank }));
    }
    // A chart of one curve per mechanism, and a hover rule: anywhere over the chart, the nearest x is marked and
    // its tooltip lists x (with the query's token from the file where it has one) and every mechanism's value.
    const chart = (values, x, y, xTitle, yTitle, yScale, extra = []) => {
      const lines = mechanismLines(names, values, {
        x: { field: x, type: "quantitative", title: xTitle },
        y: Object.assign({ field: y, type: "quantitative", title: yTitle }, yScale ? { scale: yScale } : {}),
        color: { field: "mechanism", type: "nominal", scale: colorScale(names), legend: null },
      }, names.every((n) => values.filter((v) => v.mechanism === n).length <= 24));   // points on short curves only
      const hover = {
        transform: [{ pivot: "mechanism", value: y, groupby: [x, ...extra.map((e) => e.field)] }],
        mark: { type: "rule", color: "#777", strokeWidth: 1 },
        encoding: {
          x: { field: x, type: "quantitative" },
          opacity: { condition: { param: "hover", empty: false, value: 0.7 }, value: 0 },
          tooltip: [{ field: x, type: "quantitative", title: xTitle }, ...extra,
                    ...names.map((n) => ({ field: n, type: "quantitative", format: ".4~g", title: labelOf(n) }))],
        },
        params: [{ name: "hover", select: { type: "point", fields: [x], nearest: true, on: "mouseover", clear: "mouseout" } }],
      };
      return { $schema: "https://vega.github.io/schema/vega-lite/v5.json", width: 260, height: 170, data: lines.data,
               layer: [{ encoding: lines.encoding, layer: lines.layer }, hover] };
    };
    const boxes = [];
    if (spectrum.length)
      boxes.push(["Singular spectra", chart(spectrum, "index", "sigma", "index i", "singular value σ_i (log)", { type: "log" }),
                  spectrum, "sigma"]);
    if (entropy.length)
      boxes.push(["Entropy per query", chart(entropy, "query", "entropy", "query", "row entropy (nats)", null,
                                             input.tokens ? [{ field: "token", title: "query token" }] : []), entropy, "entropy"]);
    if (profile.length)
      boxes.push(["Semiseparable profile", chart(profile, "split", "rank", "split h", "rank of A[h:N, 0:h]"), profile, "rank"]);
    for (const [title, spec, values, y] of boxes) {
      const box = el("div", { class: "chart" }, el("div", { class: "chart-title" }, title));
      const host = el("div");
      box.append(host);
      const same = coinciding(names, values, y);
      if (same.length)
        box.append(el("div", { class: "coincide" }, same.map((g) => g.map(labelOf).join(" = ")).join("; ") + ": the lines coincide"));
      target.append(box);
      embed(host, spec);
    }
  }

  // The groups of mechanisms whose curves are the same (as many points, each equal to 1e-4 relative): a note under
  // the chart says so, as their lines lie on each other.
  function coinciding(names, values, y) {
    const curves = new Map(names.map((n) => [n, values.filter((v) => v.mechanism === n).map((v) => v[y])]));
    const equal = (a, b) => a.length > 0 && a.length === b.length &&
      a.every((v, i) => Math.abs(v - b[i]) <= 1e-4 * Math.max(Math.abs(v), Math.abs(b[i])));
    const groups = [];
    for (const n of names) {
      const g = groups.find((group) => equal(curves.get(group[0]), curves.get(n)));
      if (g) g.push(n);
      else groups.push([n]);
    }
    return groups.filter((g) => g.length > 1);
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
    // The image's size before it loads: a page opened at a head's anchor stays there while the images arrive.
    const size = u.figure_size ? { width: u.figure_size[0], height: u.figure_size[1] } : {};
    if (u.figure)
      row.append(el("img", Object.assign({ class: "maps", src: u.figure, alt: `attention maps, layer ${u.layer} head ${u.head}` },
                                          size)));
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

  // An input's facts, how to reproduce its numbers and what was measured with which options.
  function inputHeading(sec, input) {
    sec.append(el("p", { class: "facts" },
      `${input.file} (SHA-256 ${input.sha256.slice(0, 16)}…): ${input.layers.length} layer(s) x ${input.heads.length} head(s), ` +
      `N = ${input.n}, d = ${input.d}${input.causal ? ", causal" : ""}. ${input.sentence}`));
    sec.append(el("p", { class: "command-line" }, "Reproduce every number of this input: ", el("code", {}, input.batch_command)));
  }

  function build() {
    const main = document.getElementById("inputs");
    for (const input of R.inputs) {
      const sec = el("section", { class: "input", id: "input-" + input.name });
      sec.append(el("h2", {}, input.name));
      inputHeading(sec, input);
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
      if (input.pages) {   // paged by layer: a link per layer's page
        const links = el("p", { class: "layer-pages" }, `${input.units.length} heads, one page per layer: `);
        for (const p of input.pages)
          links.append(el("a", { href: encodeURIComponent(p.page) }, "layer " + p.layer), " ");
        sec.append(links);
      } else {
        for (const u of input.units) sec.append(headSection(input, u));
      }
      main.append(sec);
    }
    for (const m of R.measures) measureSelect.append(el("option", { value: m.key }, m.label));
    measureSelect.value = R.measures[0].key;
    measureSelect.addEventListener("change", drawOverviews);
    drawOverviews();
  }

  // A layer page: the heads of one layer of one paged input, with links to the overview and to the layers next
  // to it (plain links: they work from file://).
  function buildLayer(L) {
    const input = R.inputs.find((i) => i.name === L.input);
    document.getElementById("choose").remove();
    const nav = document.getElementById("pages");
    const main = document.getElementById("inputs");
    if (!input || !input.pages) {   // a layer page left by an earlier report of this folder
      nav.append(el("a", { id: "overview", href: "index.html" }, "↑ overview"));
      main.append(el("p", { class: "error" },
                     `This page is from an earlier report: ${L.input} is no longer paged by layer.`));
      return;
    }
    const at = input.pages.findIndex((p) => p.layer === L.layer);
    const prev = input.pages[at - 1], next = input.pages[at + 1];
    nav.append(el("a", { id: "overview", href: "index.html#" + encodeURIComponent("input-" + input.name) }, "↑ overview"),
               prev ? el("a", { id: "prev", href: encodeURIComponent(prev.page) }, "← layer " + prev.layer)
                    : el("span", { class: "off" }, "← (first layer)"),
               next ? el("a", { id: "next", href: encodeURIComponent(next.page) }, "layer " + next.layer + " →")
                    : el("span", { class: "off" }, "(last layer) →"),
               el("span", {}, `${input.name}: layer ${L.layer}, ${at + 1} of ${input.pages.length}`));
    const sec = el("section", { class: "input", id: "input-" + input.name });
    sec.append(el("h2", {}, `${input.name}, layer ${L.layer}`));
    inputHeading(sec, input);
    for (const u of L.units) sec.append(headSection(input, u));
    main.append(sec);
  }

  drawLegend();
  if (window.ATTNSCOPE_LAYER) buildLayer(window.ATTNSCOPE_LAYER);
  else build();
  window.ATTNSCOPE_REPORT_FAILURES = failures;
})();
