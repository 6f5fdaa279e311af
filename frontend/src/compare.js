/* Compare page: draws the chart the server checked (dashboard/compare.py) with charts.js. */
(function () {
  "use strict";
  const figure = document.getElementById("compare-figure");
  if (!figure || !window.qoelabCharts) return;
  const note = figure.querySelector("[data-role=chart-note]");
  const stat = figure.querySelector("[data-role=chart-stat]");
  fetch(figure.dataset.chartUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => {
      if (!ok) {
        const errors = body.errors || {};
        note.textContent = Object.keys(errors).length
          ? Object.entries(errors).map(([f, m]) => `${f}: ${m}`).join("; ")
          : body.detail || "The chart could not be drawn.";
        return;
      }
      const points = body.series.reduce((n, s) => n + s.points.length, 0);
      figure.dataset.points = String(points);
      figure.dataset.spec = JSON.stringify({ chart: new URL(figure.dataset.chartUrl, window.location.href).href });
      if (stat) stat.textContent = window.qoelabCharts.caption(body);
      if (!points) note.textContent = "None of these sweeps has finished trials with this metric yet.";
      window.qoelabCharts.render(figure.querySelector("canvas"), body);
    })
    .catch((err) => {
      note.textContent = `No chart: ${err.message}`;
    });
})();
