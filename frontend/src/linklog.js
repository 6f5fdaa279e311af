/* Trial page: a trace link's log as Mahimahi's mm-graph draws it, per direction: the capacity the
 * trace offered against the throughput the link carried, and the longest queueing delay, per bin.
 * The data (100 ms bins, computed on the server from link_log.json) is in #link-log-data. */
(function () {
  "use strict";
  const raw = document.getElementById("link-log-data");
  if (!raw || !window.Chart) return;
  const data = JSON.parse(raw.textContent);

  function line(label, t, values, color, fill) {
    return {
      label,
      data: t.map((x, i) => ({ x, y: values[i] })),
      borderColor: color,
      backgroundColor: fill ? color + "33" : color,
      fill: fill ? "origin" : false,
      // Each value is its bin's, from t to t + bin: drawn as steps.
      stepped: "after",
      pointRadius: 0,
      borderWidth: 1.5,
      spanGaps: false,
    };
  }

  function chart(canvas, datasets, yTitle) {
    return new window.Chart(canvas, {
      type: "line",
      data: { datasets },
      options: {
        animation: false,
        parsing: false,
        maintainAspectRatio: false,
        scales: {
          x: { type: "linear", title: { display: true, text: "time since the trace started (s)" } },
          y: { beginAtZero: true, title: { display: true, text: yTitle } },
        },
        plugins: { legend: { position: "bottom" } },
      },
    });
  }

  Object.entries(data.directions || {}).forEach(([name, d]) => {
    const mbit = (v) => v.map((x) => x / 1e6);
    const rate = document.querySelector(`figure[data-link-log="${name}-rate"] canvas`);
    const delay = document.querySelector(`figure[data-link-log="${name}-delay"] canvas`);
    if (rate) {
      chart(rate, [
        line("capacity (trace)", d.t_s, mbit(d.capacity_bps), "#8fa8c8", true),
        line("throughput", d.t_s, mbit(d.throughput_bps), "#c0392b", false),
      ], "Mbit/s");
    }
    if (delay) chart(delay, [line("queueing delay", d.t_s, d.queue_delay_ms, "#2c7a4b", false)], "ms");
  });
})();
