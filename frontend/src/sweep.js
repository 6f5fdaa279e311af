/* Sweep page: live progress without reload, preset charts and the custom-chart control.
 *
 * Reads its URLs from data- attributes the template writes, polls the sweep's progress in the REST
 * API (GET /api/sweeps/<id>/progress/, session-authenticated) every 2 s while trials are open, and when the number of finished trials changes it re-fetches the trial
 * table (server-rendered HTML fragment) and redraws the charts. Needs charts.js loaded first.
 */
(function () {
  "use strict";

  const POLL_MS = 2000;

  function formatEta(seconds) {
    if (seconds == null) return "unknown";
    if (seconds < 1) return "less than a second";
    const s = Math.round(seconds);
    if (s < 90) return `${s} s`;
    const m = Math.round(s / 60);
    if (m < 90) return `${m} min`;
    return `${(m / 60).toFixed(1)} h`;
  }

  // The server's own reason for a refused request ("facet: must differ from x and series"), so
  // the researcher sees what to change rather than a status code.
  async function reason(r) {
    try {
      const body = await r.json();
      if (body.errors && typeof body.errors === "object" && !Array.isArray(body.errors)) {
        return Object.entries(body.errors)
          .map(([field, msg]) => `${field}: ${[].concat(msg).join("; ")}`)
          .join("; ");
      }
      if (Array.isArray(body.errors)) return body.errors.map((e) => `${e.field}: ${e.message}`).join("; ");
      if (body.detail) return body.detail;
    } catch (_) {
      // not JSON: fall through to the status
    }
    return `HTTP ${r.status}`;
  }

  async function getJson(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!r.ok) throw new Error(await reason(r));
    return r.json();
  }

  function setText(root, field, value) {
    root.querySelectorAll(`[data-field="${field}"]`).forEach((el) => {
      el.textContent = value;
    });
  }

  // ---- charts --------------------------------------------------------------------------------

  // One canvas per panel: keeps the first box (the template's), adds or removes boxes as needed.
  function panelCanvases(figure, count, ariaLabels) {
    const holder = figure.querySelector(".chart-panels");
    let boxes = Array.from(holder.querySelectorAll(".canvas-box"));
    while (boxes.length > count && boxes.length > 1) {
      const box = boxes.pop();
      const old = window.Chart.getChart(box.querySelector("canvas"));
      if (old) old.destroy();
      box.remove();
    }
    while (boxes.length < count) {
      const box = boxes[0].cloneNode(false);
      const canvas = document.createElement("canvas");
      canvas.setAttribute("role", "img");
      box.appendChild(canvas);
      holder.appendChild(box);
      boxes.push(box);
    }
    const canvases = boxes.map((b) => b.querySelector("canvas"));
    canvases.forEach((c, i) => {
      if (ariaLabels[i]) c.setAttribute("aria-label", `Chart: ${ariaLabels[i]}`);
    });
    return canvases;
  }

  // A chart that cannot be drawn must not leave the previous one standing beside the error.
  function clearChart(figure) {
    panelCanvases(figure, 1, []).forEach((canvas) => {
      const old = window.Chart.getChart(canvas);
      if (old) old.destroy();
    });
    figure.dataset.points = "0";
    figure.dataset.panels = "0";
  }

  async function drawChart(figure, url) {
    const note = figure.querySelector("[data-role=chart-note]");
    const stat = figure.querySelector("[data-role=chart-stat]");
    try {
      const payload = await getJson(url);
      if (stat) stat.textContent = window.qoelabCharts.caption(payload);
      // What a downloaded figure records as its source (figures.js): the data URL with its query.
      figure.dataset.spec = JSON.stringify({ chart: new URL(url, window.location.href).href });
      const parts = window.qoelabCharts.panels(payload);
      const points = parts.reduce((n, part) => n + part.series.reduce((m, s) => m + s.points.length, 0), 0);
      figure.dataset.points = String(points);
      figure.dataset.panels = String(parts.length);
      figure.classList.toggle("faceted", Boolean(payload.facet));
      if (note) note.textContent = points ? "" : "No finished trials with this metric yet.";
      const canvases = panelCanvases(
        figure,
        parts.length,
        parts.map((part) => part.title),
      );
      parts.forEach((part, i) => window.qoelabCharts.render(canvases[i], part));
    } catch (err) {
      clearChart(figure);
      if (note) note.textContent = `No chart: ${err.message}`;
    }
  }

  function presetFigures() {
    return Array.from(document.querySelectorAll("figure[data-chart-url]"));
  }

  function customUrl(form) {
    const params = new URLSearchParams(new FormData(form));
    // Unchecked checkboxes are absent from FormData; the view reads absence as "off".
    return `${form.dataset.chartUrl}?${params.toString()}`;
  }

  // Resolves when every chart has been redrawn (drawChart reports its own errors, never rejects).
  function redrawAll() {
    const draws = presetFigures().map((f) => drawChart(f, f.dataset.chartUrl));
    const form = document.getElementById("custom-chart");
    if (form) draws.push(drawChart(document.getElementById("custom-chart-figure"), customUrl(form)));
    return Promise.all(draws);
  }

  function setUpCustomChart() {
    const form = document.getElementById("custom-chart");
    if (!form) return;
    const figure = document.getElementById("custom-chart-figure");
    const redraw = () => drawChart(figure, customUrl(form));
    form.addEventListener("change", redraw);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      redraw();
    });
  }

  // ---- progress ------------------------------------------------------------------------------

  async function refreshTrials(url) {
    const holder = document.getElementById("trials");
    if (!holder || !url) return;
    const r = await fetch(url, { credentials: "same-origin" });
    if (r.ok) holder.innerHTML = await r.text();
  }

  // The sweep's progress (GET /api/sweeps/<id>/progress/, shared between pages for a second):
  // flatten it and name the state the same way the server-rendered page does (dashboard.services.progress).
  function fromApi(p) {
    const c = p.counts;
    const finished = p.total > 0 && p.done === p.total;
    let state = "waiting";
    if (finished) state = p.cancelled ? "cancelled" : "finished";
    else if (p.blocked) state = "blocked";
    else if (c.running || p.done) state = "running";
    return { ...c, total: p.total, done: p.done, finished, state, eta_s: p.eta_s, blocked: p.blocked };
  }

  function showProgress(root, p) {
    const bar = root.querySelector("progress");
    bar.max = Math.max(p.total, 1);
    bar.value = p.done;
    setText(root, "done", p.done);
    setText(root, "total", p.total);
    setText(root, "succeeded", p.succeeded);
    setText(root, "failed", p.failed);
    setText(root, "running", p.running);
    setText(root, "waiting", p.pending + p.queued);
    setText(root, "cancelled", p.cancelled);
    setText(root, "eta", p.finished ? "finished" : formatEta(p.eta_s));
    setText(root, "state", p.state);
    setText(root, "blocked", p.blocked || "");
    root.dataset.state = p.state;
    const cancel = document.getElementById("cancel-sweep");
    if (cancel) cancel.hidden = p.finished;
    // Rendered hidden when nothing had failed yet: failures that come in while the page is open
    // offer their re-run without a reload.
    const rerun = document.getElementById("rerun-failed");
    if (rerun && !p.cancelled) {
      rerun.hidden = !(p.failed > 0);
      setText(rerun, "rerun-count", p.failed);
      setText(rerun, "rerun-plural", p.failed === 1 ? "" : "s");
    }
  }

  function startPolling(root) {
    let lastDone = Number(root.dataset.done || -1);
    let stopped = false;
    // The progress answer is shared between pages for up to a second: "finished" is believed (and
    // polling stopped) only when a second answer, one poll later, says it too.
    let finishedBefore = false;
    async function tick() {
      if (stopped) return;
      try {
        const p = fromApi(await getJson(root.dataset.progressUrl));
        const changed = p.done !== lastDone;
        lastDone = p.done;
        // Table and charts first, so that "finished" never shows next to stale ones.
        if (changed) await Promise.all([refreshTrials(root.dataset.trialsUrl), redrawAll()]);
        showProgress(root, p);
        root.querySelector("[data-role=poll-error]").textContent = "";
        if (p.finished && finishedBefore) {
          stopped = true;
          return;
        }
        finishedBefore = p.finished;
      } catch (err) {
        // Keep polling: a restarting web server should not freeze the page for good.
        root.querySelector("[data-role=poll-error]").textContent = `Progress update failed (${err.message}); retrying.`;
      }
      setTimeout(tick, POLL_MS);
    }
    tick();
  }

  document.addEventListener("DOMContentLoaded", () => {
    setUpCustomChart();
    redrawAll();
    const root = document.getElementById("progress");
    if (root) startPolling(root);
  });
})();
