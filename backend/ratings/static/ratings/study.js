/* Imported study page: the per-stimulus chart (plain mean and subject model) with the dashboard's
 * chart code (window.qoelabCharts); the payload is computed on the server. */
(function () {
  "use strict";
  const raw = document.getElementById("study-chart");
  const fig = document.querySelector('figure[data-chart-key="study"]');
  if (!raw || !fig || !window.qoelabCharts) return;
  const payload = JSON.parse(raw.textContent);
  // The caption stays the page's own: the model's interval is not a Student-t one.
  window.qoelabCharts.render(fig.querySelector("canvas"), payload);
})();
