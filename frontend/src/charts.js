/* qoelab charts: mean with 95 % confidence-interval whiskers per x value, one dataset per series.
 *
 * Plain script (no bundler): needs Chart.js's UMD build loaded first (window.Chart) and exposes
 * window.qoelabCharts.render(canvas, payload). The payload comes from the dashboard's chart.json
 * view: {title, x_label, y_label, x_scale, y_scale, log_x, log_y, identity, series: [{label,
 * points: [{x, mean, ci_low, ci_high, n}]}], facet, panels: [{label, series}]} and optionally
 * y_min/y_max (a fixed y range: DMOS is drawn on 1-5, whiskers beyond it end in an arrowhead) and
 * x_ticks: "points" (one tick per x that has a point). Values arrive in SI units and are divided by
 * x_scale/y_scale for display (1e6 shows bit/s as Mbit/s); the unit in an axis label's trailing
 * parentheses goes into the tooltips. A point of one run is hollow and says "single run, no CI";
 * caption(payload) words the figure caption the same way. A faceted payload is drawn as one chart
 * per panel (panels(payload), one canvas each).
 *
 * Error bars are a small own plugin rather than chartjs-chart-error-bars: the whiskers are a
 * dozen lines of canvas code, they work on linear and logarithmic axes alike, and the points stay
 * in Chart.js's plain {x, y} format (plus yMin/yMax/n), so tests and tooltips read them directly.
 */
(function () {
  "use strict";

  // Okabe–Ito palette: distinguishable with the common colour-vision deficiencies.
  const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

  const errorBars = {
    id: "qoelabErrorBars",
    afterDatasetsDraw(chart) {
      const { ctx, chartArea, scales } = chart;
      const yScale = scales.y;
      ctx.save();
      // Whiskers that run off a log axis (a non-positive bound) are clipped at the chart edge.
      ctx.beginPath();
      ctx.rect(chartArea.left, chartArea.top, chartArea.right - chartArea.left, chartArea.bottom - chartArea.top);
      ctx.clip();
      chart.data.datasets.forEach((ds, i) => {
        if (!ds.qoelabErrorBars || !chart.isDatasetVisible(i)) return;
        const meta = chart.getDatasetMeta(i);
        ctx.strokeStyle = ds.borderColor;
        ctx.lineWidth = 1.5;
        meta.data.forEach((el, j) => {
          const p = ds.data[j];
          if (!p || p.yMin == null || p.yMax == null) return;
          const top = pixel(yScale, p.yMax, chartArea.top);
          const bottom = pixel(yScale, p.yMin, chartArea.bottom);
          const x = el.x;
          const cap = 5;
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, bottom);
          // A whisker that runs past a fixed axis end (DMOS: 1-5) ends in an arrowhead, not a cap.
          const { overTop, underBottom } = clipped(p, yScale);
          if (!overTop) {
            ctx.moveTo(x - cap, top);
            ctx.lineTo(x + cap, top);
          }
          if (!underBottom) {
            ctx.moveTo(x - cap, bottom);
            ctx.lineTo(x + cap, bottom);
          }
          ctx.stroke();
          ctx.fillStyle = ds.borderColor;
          if (overTop) arrowhead(ctx, x, chartArea.top, 1);
          if (underBottom) arrowhead(ctx, x, chartArea.bottom, -1);
        });
      });
      ctx.restore();
    },
  };

  // Whether an interval runs past the y axis' ends (yBounds or a payload's y_min/y_max set them).
  function clipped(p, yScale) {
    return {
      overTop: yScale.options.max != null && p.yMax > yScale.options.max,
      underBottom: yScale.options.min != null && p.yMin < yScale.options.min,
    };
  }

  function arrowhead(ctx, x, y, up) {
    ctx.beginPath();
    ctx.moveTo(x, y);
    ctx.lineTo(x - 4, y + 7 * up);
    ctx.lineTo(x + 4, y + 7 * up);
    ctx.closePath();
    ctx.fill();
  }

  function pixel(scale, value, fallback) {
    if (scale.type === "logarithmic" && !(value > 0)) return fallback;
    const px = scale.getPixelForValue(value);
    return Number.isFinite(px) ? px : fallback;
  }

  function fmt(v) {
    if (v == null || !Number.isFinite(v)) return "–";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
    return Number(v.toPrecision(4)).toString();
  }

  // The unit an axis label ends with in parentheses ("TCP throughput (Mbit/s)" -> "Mbit/s").
  function unitOf(label) {
    const m = /\(([^()]+)\)\s*$/.exec(label || "");
    return m ? m[1] : "";
  }

  function withUnit(value, unit) {
    return unit ? `${value} ${unit}` : value;
  }

  // What the points and bars are, for the figure's caption: every point one run says so instead
  // of promising intervals it cannot draw.
  function caption(payload) {
    const ns = panels(payload).flatMap((part) => part.series.flatMap((s) => s.points.map((p) => p.n)));
    const known = ns.filter((n) => n != null);
    if (known.length && known.every((n) => n === 1)) return "single run per point, no CI";
    if (known.some((n) => n === 1)) {
      return "mean ± 95 % CI (Student t); hollow points are single runs, no CI";
    }
    return "mean ± 95 % CI (Student t) per point";
  }

  // The x values as categories when x is a parameter with text or yes/no values (protocol, server):
  // in the server's order, first seen first. null when x is numeric.
  function categories(payload) {
    const values = payload.series.flatMap((s) => s.points.map((p) => p.x)).filter((v) => v != null);
    if (!values.some((v) => typeof v === "string" || typeof v === "boolean")) return null;
    return [...new Set(values.map(String))];
  }

  // Builds Chart.js datasets from a chart.json payload; exported for the dashboard's own checks.
  // A categorical x is drawn on a linear axis at 0, 1, 2, … (labelled by axis()), so the error
  // bars and tooltips work as for numbers; its points are not joined by lines.
  // A series with no x at all (the x parameter does not apply to it, as speedup does not to Fig.
  // 3.11's software and hardware runs) is a reference: a dashed line at its mean across the chart.
  function isReference(s) {
    return s.points.length > 0 && s.points.every((p) => p.x == null);
  }

  function datasets(payload) {
    const xs = payload.x_scale || 1;
    const ys = payload.y_scale || 1;
    const cats = categories(payload);
    const refs = payload.series.filter(isReference);
    const out = payload.series.filter((s) => !isReference(s)).map((s, i) => {
      const color = PALETTE[i % PALETTE.length];
      const points = s.points
        .map((p) => ({
          x: cats ? cats.indexOf(String(p.x)) : p.x / xs,
          y: p.mean / ys,
          // n = 1 has no interval (ci_low/ci_high are null): the point is drawn without a bar.
          yMin: p.ci_low == null ? null : p.ci_low / ys,
          yMax: p.ci_high == null ? null : p.ci_high / ys,
          n: p.n,
        }))
        .filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y))
        .sort((a, b) => a.x - b.x);
      return {
        label: s.label,
        data: points,
        borderColor: color,
        backgroundColor: color,
        // A single run is drawn hollow: no interval, and the eye should see that.
        pointBackgroundColor: points.map((p) => (p.n === 1 ? "#ffffff" : color)),
        showLine: points.length > 1 && !cats,
        borderWidth: 1.5,
        pointRadius: 4,
        pointHoverRadius: 6,
        qoelabErrorBars: true,
      };
    });
    const spanX = out.flatMap((d) => d.data.map((p) => p.x));
    refs.forEach((s, i) => {
      const mean = s.points.reduce((a, p) => a + p.mean, 0) / s.points.length / ys;
      if (!spanX.length || !Number.isFinite(mean)) return;
      const color = PALETTE[(out.length + i) % PALETTE.length];
      out.push({
        label: s.label,
        data: [
          { x: Math.min(...spanX), y: mean },
          { x: Math.max(...spanX), y: mean },
        ],
        borderColor: color,
        backgroundColor: color,
        borderDash: [6, 4],
        borderWidth: 1.5,
        pointRadius: 0,
        showLine: true,
        qoelabErrorBars: false,
      });
    });
    if (payload.identity) {
      const all = out.flatMap((d) => d.data.flatMap((p) => [p.x, p.y]));
      if (all.length) {
        const positive = all.filter((v) => v > 0);
        const lo = payload.log_x || payload.log_y ? Math.min(...positive) : Math.min(0, ...all);
        const hi = Math.max(...all);
        out.push({
          label: "y = x",
          data: [
            { x: lo, y: lo },
            { x: hi, y: hi },
          ],
          borderColor: "#888",
          backgroundColor: "#888",
          borderDash: [6, 4],
          borderWidth: 1,
          pointRadius: 0,
          showLine: true,
          qoelabErrorBars: false,
        });
      }
    }
    return out;
  }

  // Splits a payload into one payload per panel (a faceted chart: the thesis' "(a) 1 Mbit/s,
  // (b) 10 Mbit/s"). Each keeps the chart's axes and scales; its title names the panel. A payload
  // without panels (an older server) or without a facet is one panel, drawn as before.
  function panels(payload) {
    if (!payload.facet || !Array.isArray(payload.panels) || !payload.panels.length) return [payload];
    return payload.panels.map((panel) => ({
      ...payload,
      title: payload.title ? `${payload.title} ${panel.label}` : panel.label,
      series: panel.series,
      panel: panel.label,
    }));
  }

  // The y range, from the means first. Whiskers widen it by at most the means' own span each way
  // (two runs give a t factor of 12.7: Fig. 4.6's intervals once pushed the axis to -3,000 ms and
  // squashed every mean into a line); a whisker cut there ends in an arrowhead. A margin keeps the
  // lowest series off the axis line, where it read as zero, and an axis whose means are all
  // non-negative does not go below zero. Log axes keep every positive value.
  function yBounds(sets, log) {
    const usable = (v) => v != null && Number.isFinite(v) && (!log || v > 0);
    const points = sets.flatMap((d) => d.data);
    const means = points.map((p) => p.y).filter(usable);
    const whiskers = points.flatMap((p) => [p.yMin, p.yMax]).filter(usable);
    if (!means.length) return {};
    if (log) {
      const all = means.concat(whiskers);
      return { suggestedMin: Math.min(...all), suggestedMax: Math.max(...all) };
    }
    const lowest = Math.min(...means);
    const highest = Math.max(...means);
    const reach = highest - lowest || Math.abs(highest) || 1;
    let lo = lowest;
    let hi = highest;
    for (const v of whiskers) {
      lo = Math.min(lo, Math.max(v, lowest - reach));
      hi = Math.max(hi, Math.min(v, highest + reach));
    }
    if (lowest >= 0) lo = Math.max(0, lo);
    const margin = (hi - lo || reach) * 0.06;
    return { min: lowest >= 0 ? Math.max(0, lo - margin) : lo - margin, max: hi + margin };
  }

  // Pad the x range so end points and their whiskers are not cut in half by the chart edge.
  function xBounds(sets, log) {
    const xs = sets.flatMap((d) => d.data.map((p) => p.x)).filter((v) => Number.isFinite(v) && (!log || v > 0));
    if (!xs.length) return {};
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    if (log) return { min: lo / 1.3, max: hi * 1.3 };
    const pad = (hi - lo || Math.abs(hi) || 1) * 0.05;
    return { min: lo - pad, max: hi + pad };
  }

  // A log axis labels every minor tick (1.5, 3, 4, …); keep 1-2-5 steps so labels stay readable.
  function logTicks(value) {
    const mantissa = Number((value / Math.pow(10, Math.floor(Math.log10(value)))).toPrecision(3));
    return [1, 2, 5].includes(mantissa) ? fmt(value) : "";
  }

  function axis(log, title, cats) {
    if (cats) {
      return {
        type: "linear",
        title: { display: true, text: title },
        min: -0.5,
        max: cats.length - 0.5,
        // One tick per category, at its index (Chart.js would start its steps at min, -0.5).
        afterBuildTicks: (scale) => {
          scale.ticks = cats.map((_, i) => ({ value: i }));
        },
        ticks: { callback: (v) => cats[v] ?? "" },
      };
    }
    const out = { type: log ? "logarithmic" : "linear", title: { display: true, text: title } };
    // includeBounds off: the padded ends (e.g. -2.45) are not nice numbers to label.
    out.ticks = log ? { autoSkip: false, includeBounds: false, callback: logTicks } : { includeBounds: false };
    return out;
  }

  // payload.x_ticks === "points": one tick at each x that has a point (few conditions, e.g. DMOS
  // charts), rather than Chart.js's round steps between them.
  function pointTicks(sets) {
    const xs = [...new Set(sets.flatMap((d) => (d.qoelabErrorBars ? d.data.map((p) => p.x) : [])))];
    return {
      afterBuildTicks: (scale) => {
        scale.ticks = xs.sort((a, b) => a - b).map((value) => ({ value }));
      },
      ticks: { autoSkip: false, callback: (v) => fmt(v) },
    };
  }

  // payload.y_min / y_max fix the y axis (DMOS: 1-5); whiskers beyond it are clipped and marked.
  function yFixed(payload) {
    const out = {};
    if (payload.y_min != null) out.min = payload.y_min;
    if (payload.y_max != null) out.max = payload.y_max;
    return out;
  }

  function render(canvas, payload) {
    const old = window.Chart.getChart(canvas);
    if (old) old.destroy();
    const sets = datasets(payload);
    const cats = categories(payload);
    const xUnit = unitOf(payload.x_label);
    const yUnit = unitOf(payload.y_label);
    const xAxis = cats
      ? axis(false, payload.x_label, cats)
      : { ...axis(payload.log_x, payload.x_label), ...xBounds(sets, payload.log_x) };
    if (!cats && payload.x_ticks === "points") Object.assign(xAxis, pointTicks(sets));
    const chart = new window.Chart(canvas, {
      type: "scatter",
      data: { datasets: sets },
      plugins: [errorBars],
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: xAxis,
          y: { ...axis(payload.log_y, payload.y_label), ...yBounds(sets, payload.log_y), ...yFixed(payload) },
        },
        plugins: {
          // Every chart names its series, even a single one: a figure is read without its page.
          legend: { display: sets.length > 0, position: "bottom" },
          title: { display: Boolean(payload.title), text: payload.title },
          tooltip: {
            callbacks: {
              label(item) {
                const p = item.raw;
                const x = cats ? cats[p.x] : withUnit(fmt(p.x), xUnit);
                if (p.n === 1) return `${item.dataset.label}: x = ${x}, ${withUnit(fmt(p.y), yUnit)} (single run, no CI)`;
                const ci = p.yMin == null ? "no CI" : `95 % CI ${fmt(p.yMin)} – ${withUnit(fmt(p.yMax), yUnit)}`;
                const n = p.n == null ? "" : `, n = ${p.n}`;
                return `${item.dataset.label}: x = ${x}, mean ${withUnit(fmt(p.y), yUnit)} (${ci}${n})`;
              },
            },
          },
        },
      },
    });
    return chart;
  }

  window.qoelabCharts = { render, datasets, panels, categories, caption, unitOf, errorBars, yBounds };
})();
