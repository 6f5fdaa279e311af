/* Campaign results page: draws Figs 4.3/4.4 for the chosen aspect, protocol and screening with the
 * dashboard's chart code (window.qoelabCharts). Payloads are computed on the server. */
(function () {
  "use strict";
  const raw = document.getElementById("dmos-charts");
  if (!raw || !window.qoelabCharts) return;
  const all = JSON.parse(raw.textContent);
  const aspect = document.getElementById("chart-aspect");
  const protocol = document.getElementById("chart-protocol");
  const part = document.getElementById("chart-part");

  function draw() {
    const payloads = (all[part.value] || {})[aspect.value + "|" + protocol.value];
    ["fig43", "fig44"].forEach((key) => {
      const fig = document.querySelector(`figure[data-chart-key="${key}"]`);
      const canvas = fig.querySelector("canvas");
      const note = fig.querySelector("[data-role='chart-note']");
      if (!payloads) return;
      window.qoelabCharts.render(canvas, payloads[key]);
      // What a downloaded figure records as its source (figures.js).
      fig.dataset.spec = JSON.stringify({
        figure: key,
        aspect: aspect.value,
        protocol: protocol.value,
        evaluators: part.value,
      });
      const stat = fig.querySelector("[data-role='chart-stat']");
      if (stat) stat.textContent = window.qoelabCharts.caption(payloads[key]);
      if (note) note.textContent = payloads.measured ? "" : "Some conditions have no measured throughput; their configured rate is used.";
    });
  }
  [aspect, protocol, part].forEach((el) => el && el.addEventListener("change", draw));
  draw();
})();
