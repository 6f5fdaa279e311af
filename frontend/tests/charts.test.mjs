// Unit tests of the chart data transform in src/charts.js (node --test; no browser, no Chart.js).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import vm from "node:vm";

function loadCharts() {
  const window = {};
  vm.runInNewContext(readFileSync(new URL("../src/charts.js", import.meta.url), "utf8"), { window });
  const charts = window.qoelabCharts;
  // Objects made inside the vm context have its prototypes; compare plain copies.
  return {
    datasets: (p) => JSON.parse(JSON.stringify(charts.datasets(p))),
    panels: (p) => JSON.parse(JSON.stringify(charts.panels(p))),
    categories: (p) => JSON.parse(JSON.stringify(charts.categories(p))),
    yBounds: (sets, log) => JSON.parse(JSON.stringify(charts.yBounds(sets, log))),
  };
}

const payload = {
  x_scale: 1e6,
  y_scale: 1e6,
  identity: true,
  series: [
    {
      label: "delay = 5ms",
      points: [
        { x: 10e6, mean: 9e6, ci_low: 8e6, ci_high: 10e6, n: 3 },
        { x: 1e6, mean: 0.9e6, ci_low: null, ci_high: null, n: 1 },
      ],
    },
  ],
};

test("points are scaled for display and sorted by x", () => {
  const [series] = loadCharts().datasets(payload);
  assert.deepEqual(
    series.data.map((p) => [p.x, p.y]),
    [
      [1, 0.9],
      [10, 9],
    ],
  );
  assert.equal(series.data[1].yMin, 8);
  assert.equal(series.data[1].yMax, 10);
});

test("a point from one run has no error bar", () => {
  const [series] = loadCharts().datasets(payload);
  assert.equal(series.data[0].n, 1);
  assert.equal(series.data[0].yMin, null);
  assert.equal(series.data[0].yMax, null);
});

test("the identity line spans the data and carries no error bars", () => {
  const sets = loadCharts().datasets(payload);
  const identity = sets.at(-1);
  assert.equal(identity.label, "y = x");
  assert.equal(identity.qoelabErrorBars, false);
  assert.deepEqual(identity.data, [
    { x: 0, y: 0 },
    { x: 10, y: 10 },
  ]);
});

test("the identity line starts at the smallest positive value on log axes", () => {
  const sets = loadCharts().datasets({ ...payload, log_x: true });
  assert.deepEqual(sets.at(-1).data[0], { x: 0.9, y: 0.9 });
});

const faceted = {
  title: "Fig. 4.7",
  facet: "rate",
  x_scale: 1e-3,
  y_scale: 1,
  series: [{ label: "protocol = vnc", points: [{ x: 0.01, mean: 700, ci_low: 600, ci_high: 800, n: 4 }] }],
  panels: [
    {
      label: "(a) rate = 1mbit",
      series: [{ label: "protocol = vnc", points: [{ x: 0.01, mean: 1200, ci_low: 1100, ci_high: 1300, n: 2 }] }],
    },
    {
      label: "(b) rate = 10mbit",
      series: [{ label: "protocol = vnc", points: [{ x: 0.01, mean: 200, ci_low: 150, ci_high: 250, n: 2 }] }],
    },
  ],
};

test("a faceted payload splits into one titled chart per panel with that panel's points", () => {
  const parts = loadCharts().panels(faceted);
  assert.equal(parts.length, 2);
  assert.deepEqual(
    parts.map((p) => p.title),
    ["Fig. 4.7 (a) rate = 1mbit", "Fig. 4.7 (b) rate = 10mbit"],
  );
  const { datasets } = loadCharts();
  assert.deepEqual(
    parts.map((p) => datasets(p)[0].data[0].y),
    [1200, 200],
  );
  assert.equal(datasets(parts[1])[0].data[0].x, 10); // 10 ms after the chart's x_scale
});

test("a payload without a facet stays one panel with the pooled series", () => {
  const parts = loadCharts().panels({ ...faceted, facet: null });
  assert.equal(parts.length, 1);
  assert.equal(parts[0].series[0].points[0].mean, 700);
  assert.equal(loadCharts().panels(payload).length, 1);
});

test("a parameter with text values on x becomes categories at 0, 1, … without lines", () => {
  const modes = {
    x_scale: 1,
    y_scale: 1,
    series: [
      { label: "protocol = spice", points: [{ x: "namespace", mean: 200, ci_low: 150, ci_high: 250, n: 3 }, { x: "vm", mean: 1100, ci_low: null, ci_high: null, n: 1 }] },
      { label: "protocol = vnc", points: [{ x: "vm", mean: 1700, ci_low: null, ci_high: null, n: 1 }] },
    ],
  };
  const charts = loadCharts();
  assert.deepEqual(charts.categories(modes), ["namespace", "vm"]);
  const [spice, vnc] = charts.datasets(modes);
  assert.deepEqual(spice.data.map((p) => [p.x, p.y, p.yMin]), [[0, 200, 150], [1, 1100, null]]);
  assert.deepEqual(vnc.data.map((p) => [p.x, p.y]), [[1, 1700]]);
  assert.equal(spice.showLine, false);
  assert.equal(charts.categories(payload), null);
});

test("captions say when points are single runs instead of promising intervals", () => {
  const window = {};
  vm.runInNewContext(readFileSync(new URL("../src/charts.js", import.meta.url), "utf8"), { window });
  const { caption, unitOf } = window.qoelabCharts;
  const one = (n) => ({ series: [{ label: "a", points: [{ x: 1, mean: 2, n }] }] });
  assert.equal(caption(one(1)), "single run per point, no CI");
  assert.match(caption(one(4)), /^mean ± 95 % CI/);
  const mixed = { series: [{ label: "a", points: [{ x: 1, mean: 2, n: 1 }, { x: 2, mean: 3, n: 3 }] }] };
  assert.match(caption(mixed), /hollow points are single runs/);
  assert.equal(unitOf("TCP throughput (Mbit/s)"), "Mbit/s");
  assert.equal(unitOf("DMOS"), "");
});

test("a single run is drawn hollow, a mean filled", () => {
  const [series] = loadCharts().datasets(payload);
  assert.deepEqual(series.pointBackgroundColor, ["#ffffff", series.borderColor]);
});

// Issue 33: with two runs per point (t = 12.7) the intervals pushed Fig. 4.6's axis to -3,000 ms.
test("wide intervals do not stretch the y axis past the means' own span, nor below zero", () => {
  const set = {
    data: [
      { x: 1, y: 100, yMin: -2900, yMax: 3100, n: 2 },
      { x: 2, y: 300, yMin: 250, yMax: 350, n: 2 },
    ],
  };
  const { min, max } = loadCharts().yBounds([set], false);
  assert.equal(min, 0); // non-negative means: the axis starts at zero, the cut whisker gets an arrowhead
  assert.ok(max > 500 && max <= 530, `max ${max}: one span (200) past the highest mean, plus a 6 % margin`);
});

test("a tight range keeps a margin so the lowest series does not sit on the axis", () => {
  const set = { data: [{ x: 1, y: 9.5, yMin: 9.4, yMax: 9.6 }, { x: 2, y: 10, yMin: 9.9, yMax: 10.1 }] };
  const { min, max } = loadCharts().yBounds([set], false);
  assert.ok(min < 9.4 && min > 9, `min ${min}`);
  assert.ok(max > 10.1 && max < 10.5, `max ${max}`);
});

test("intervals that fit are shown whole, and negative means keep a negative axis", () => {
  const set = { data: [{ x: 1, y: -5, yMin: -8, yMax: -2 }, { x: 2, y: 5, yMin: 2, yMax: 8 }] };
  const { min, max } = loadCharts().yBounds([set], false);
  assert.ok(min < -8 && max > 8, `${min} .. ${max}`);
});
