/* Figure downloads: every chart figure (figure.chart) gets "Download PNG" and "Download SVG".
 *
 * Both carry the figure's caption under the plot and the spec that produced it: what was drawn
 * (the chart data URL or the selection), the page, the date. The PNG stores the spec as a tEXt chunk
 * named "qoelab-spec"; the SVG as <metadata> (and the caption also as <desc>). The SVG is written from
 * the chart's own geometry (Chart.js scales and points), not traced from pixels: axes, ticks, grid,
 * points (hollow for single runs), lines, 95 % whiskers (arrowheads where clipped) and the legend.
 * A faceted figure puts its panels side by side in one file.
 *
 * Plain script after charts.js; pages set figure.dataset.spec (JSON) when they draw.
 */
(function () {
  "use strict";

  const FONT = "12px DejaVu Sans, sans-serif";
  const CAPTION_LINE = 16;

  function charts(figure) {
    return Array.from(figure.querySelectorAll("canvas"))
      .map((c) => window.Chart && window.Chart.getChart(c))
      .filter(Boolean);
  }

  function captionText(figure) {
    const cap = figure.querySelector("figcaption");
    return cap ? cap.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function spec(figure, chartList) {
    let own = {};
    try {
      own = JSON.parse(figure.dataset.spec || "{}");
    } catch (_) {
      own = {};
    }
    return {
      ...own,
      titles: chartList.map((c) => (c.options.plugins.title && c.options.plugins.title.text) || ""),
      caption: captionText(figure),
      page: window.location.href,
      downloaded_at: new Date().toISOString(),
      generator: "qoelab",
    };
  }

  function fileName(figure, ext) {
    const c = charts(figure)[0];
    const title = (c && c.options.plugins.title && c.options.plugins.title.text) || figure.dataset.chartKey || "figure";
    const slug = String(title).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 60);
    return `${slug || "figure"}.${ext}`;
  }

  // Splits the caption into lines that fit ``width`` px in ``ctx``'s font.
  function wrap(ctx, text, width) {
    const lines = [];
    let line = "";
    for (const word of text.split(" ")) {
      const next = line ? `${line} ${word}` : word;
      if (line && ctx.measureText(next).width > width) {
        lines.push(line);
        line = word;
      } else {
        line = next;
      }
    }
    if (line) lines.push(line);
    return lines;
  }

  function measureCtx() {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = FONT;
    return ctx;
  }

  function save(blob, name) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  // ---- PNG --------------------------------------------------------------------------------------

  const CRC_TABLE = (() => {
    const t = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      t[n] = c >>> 0;
    }
    return t;
  })();

  function crc32(bytes) {
    let c = 0xffffffff;
    for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }

  // A tEXt chunk (Latin-1 keyword and text; the JSON is ASCII-escaped first) after the IHDR chunk.
  function withText(png, keyword, text) {
    const ascii = text.replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`);
    const data = new TextEncoder().encode(`${keyword}\0${ascii}`);
    const chunk = new Uint8Array(12 + data.length);
    const view = new DataView(chunk.buffer);
    view.setUint32(0, data.length);
    chunk.set(new TextEncoder().encode("tEXt"), 4);
    chunk.set(data, 8);
    view.setUint32(8 + data.length, crc32(chunk.subarray(4, 8 + data.length)));
    const ihdrEnd = 8 + 25; // signature + IHDR (length, type, 13 bytes, CRC)
    const out = new Uint8Array(png.length + chunk.length);
    out.set(png.subarray(0, ihdrEnd), 0);
    out.set(chunk, ihdrEnd);
    out.set(png.subarray(ihdrEnd), ihdrEnd + chunk.length);
    return out;
  }

  async function png(figure) {
    const list = charts(figure);
    const scale = window.devicePixelRatio || 1;
    const width = list.reduce((w, c) => w + c.width, 0);
    const plotH = Math.max(...list.map((c) => c.height));
    const m = measureCtx();
    const lines = wrap(m, captionText(figure), width - 16);
    const height = plotH + 12 + lines.length * CAPTION_LINE;
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    let x = 0;
    for (const c of list) {
      ctx.drawImage(c.canvas, x, 0, c.width, c.height);
      x += c.width;
    }
    ctx.fillStyle = "#333333";
    ctx.font = FONT;
    lines.forEach((line, i) => ctx.fillText(line, 8, plotH + 8 + (i + 1) * CAPTION_LINE - 4));
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
    const bytes = new Uint8Array(await blob.arrayBuffer());
    const tagged = withText(bytes, "qoelab-spec", JSON.stringify(spec(figure, list)));
    return new Blob([tagged], { type: "image/png" });
  }

  // ---- SVG --------------------------------------------------------------------------------------

  function esc(text) {
    return String(text).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]);
  }

  function n(v) {
    return Number.isFinite(v) ? Number(v.toFixed(2)) : 0;
  }

  function axisSvg(scale, area, horizontal) {
    const out = [];
    for (const tick of scale.ticks) {
      const p = scale.getPixelForValue(tick.value);
      if (!Number.isFinite(p) || tick.label === "" || tick.label == null) continue;
      const label = Array.isArray(tick.label) ? tick.label.join(" ") : tick.label;
      if (horizontal) {
        out.push(`<line x1="${n(p)}" y1="${n(area.top)}" x2="${n(p)}" y2="${n(area.bottom)}" stroke="#e5e5e5"/>`);
        out.push(`<text x="${n(p)}" y="${n(area.bottom + 16)}" text-anchor="middle">${esc(label)}</text>`);
      } else {
        out.push(`<line x1="${n(area.left)}" y1="${n(p)}" x2="${n(area.right)}" y2="${n(p)}" stroke="#e5e5e5"/>`);
        out.push(`<text x="${n(area.left - 6)}" y="${n(p + 4)}" text-anchor="end">${esc(label)}</text>`);
      }
    }
    const title = scale.options.title && scale.options.title.display ? scale.options.title.text : "";
    if (title && horizontal) {
      out.push(`<text x="${n((area.left + area.right) / 2)}" y="${n(area.bottom + 34)}" text-anchor="middle">${esc(title)}</text>`);
    } else if (title) {
      const cy = n((area.top + area.bottom) / 2);
      out.push(`<text transform="translate(14 ${cy}) rotate(-90)" text-anchor="middle">${esc(title)}</text>`);
    }
    return out;
  }

  function chartSvg(chart) {
    const area = chart.chartArea;
    const xs = chart.scales.x;
    const ys = chart.scales.y;
    const out = [`<rect x="${n(area.left)}" y="${n(area.top)}" width="${n(area.right - area.left)}" height="${n(area.bottom - area.top)}" fill="none" stroke="#999"/>`];
    out.push(...axisSvg(xs, area, true), ...axisSvg(ys, area, false));
    const title = chart.options.plugins.title && chart.options.plugins.title.display ? chart.options.plugins.title.text : "";
    if (title) out.push(`<text x="${n(chart.width / 2)}" y="16" text-anchor="middle" font-weight="bold">${esc(title)}</text>`);
    out.push(`<g clip-path="url(#plot-${chart.id})">`);
    chart.data.datasets.forEach((ds, i) => {
      if (!chart.isDatasetVisible(i)) return;
      const pts = chart.getDatasetMeta(i).data.map((el, j) => ({ x: el.x, y: el.y, raw: ds.data[j] }));
      const dash = ds.borderDash && ds.borderDash.length ? ` stroke-dasharray="${ds.borderDash.join(" ")}"` : "";
      if (ds.showLine && pts.length > 1) {
        out.push(`<polyline fill="none" stroke="${ds.borderColor}" stroke-width="1.5"${dash} points="${pts.map((p) => `${n(p.x)},${n(p.y)}`).join(" ")}"/>`);
      }
      if (ds.qoelabErrorBars) {
        for (const p of pts) {
          if (!p.raw || p.raw.yMin == null || p.raw.yMax == null) continue;
          const top = Math.max(area.top, ys.getPixelForValue(p.raw.yMax));
          const bottom = Math.min(area.bottom, ys.getPixelForValue(p.raw.yMin));
          out.push(`<line x1="${n(p.x)}" y1="${n(top)}" x2="${n(p.x)}" y2="${n(bottom)}" stroke="${ds.borderColor}" stroke-width="1.5"/>`);
          for (const [edge, clippedEnd, dir] of [
            [top, top <= area.top + 0.5 && ys.options.max != null, 1],
            [bottom, bottom >= area.bottom - 0.5 && ys.options.min != null, -1],
          ]) {
            if (clippedEnd) {
              out.push(`<polygon points="${n(p.x)},${n(edge)} ${n(p.x - 4)},${n(edge + 7 * dir)} ${n(p.x + 4)},${n(edge + 7 * dir)}" fill="${ds.borderColor}"/>`);
            } else {
              out.push(`<line x1="${n(p.x - 5)}" y1="${n(edge)}" x2="${n(p.x + 5)}" y2="${n(edge)}" stroke="${ds.borderColor}" stroke-width="1.5"/>`);
            }
          }
        }
      }
      const radius = typeof ds.pointRadius === "number" ? ds.pointRadius : 4;
      if (radius > 0) {
        pts.forEach((p, j) => {
          const fill = Array.isArray(ds.pointBackgroundColor) ? ds.pointBackgroundColor[j] : ds.backgroundColor;
          out.push(`<circle cx="${n(p.x)}" cy="${n(p.y)}" r="${radius}" fill="${fill}" stroke="${ds.borderColor}" stroke-width="1.5"/>`);
        });
      }
    });
    out.push("</g>");
    // Legend: one row under the plot, as the page shows it.
    let lx = area.left;
    const ly = chart.height - 8;
    chart.data.datasets.forEach((ds) => {
      out.push(`<rect x="${n(lx)}" y="${n(ly - 9)}" width="12" height="10" fill="${ds.borderColor}"/>`);
      out.push(`<text x="${n(lx + 16)}" y="${n(ly)}">${esc(ds.label)}</text>`);
      lx += 30 + measureCtx().measureText(ds.label).width;
    });
    const clip = `<clipPath id="plot-${chart.id}"><rect x="${n(area.left)}" y="${n(area.top)}" width="${n(area.right - area.left)}" height="${n(area.bottom - area.top)}"/></clipPath>`;
    return { body: out.join("\n"), clip };
  }

  function svg(figure) {
    const list = charts(figure);
    const width = list.reduce((w, c) => w + c.width, 0);
    const plotH = Math.max(...list.map((c) => c.height));
    const caption = captionText(figure);
    const lines = wrap(measureCtx(), caption, width - 16);
    const height = plotH + 12 + lines.length * CAPTION_LINE;
    const parts = [];
    const clips = [];
    let x = 0;
    for (const c of list) {
      const { body, clip } = chartSvg(c);
      clips.push(clip);
      parts.push(`<g transform="translate(${n(x)} 0)">\n${body}\n</g>`);
      x += c.width;
    }
    const meta = JSON.stringify(spec(figure, list)).replace(/]]>/g, "]]]]><![CDATA[>");
    const text = lines.map((l, i) => `<text x="8" y="${n(plotH + 8 + (i + 1) * CAPTION_LINE - 4)}" fill="#333">${esc(l)}</text>`);
    const doc = [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${n(width)}" height="${n(height)}" viewBox="0 0 ${n(width)} ${n(height)}" font-family="DejaVu Sans, sans-serif" font-size="12">`,
      `<title>${esc((list[0] && list[0].options.plugins.title.text) || "qoelab figure")}</title>`,
      `<desc>${esc(caption)}</desc>`,
      `<metadata id="qoelab-spec"><![CDATA[${meta}]]></metadata>`,
      `<defs>${clips.join("")}</defs>`,
      `<rect width="100%" height="100%" fill="#ffffff"/>`,
      ...parts,
      ...text,
      "</svg>",
    ];
    return new Blob([doc.join("\n")], { type: "image/svg+xml" });
  }

  // ---- buttons ----------------------------------------------------------------------------------

  function addButtons(figure) {
    if (figure.querySelector(".figure-actions")) return;
    const bar = document.createElement("div");
    bar.className = "figure-actions";
    for (const [format, make] of [
      ["PNG", png],
      ["SVG", svg],
    ]) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "button secondary small";
      b.textContent = `Download ${format}`;
      b.addEventListener("click", async () => {
        if (!charts(figure).length) return; // nothing drawn (yet, or the chart was refused)
        save(await make(figure), fileName(figure, format.toLowerCase()));
      });
      bar.appendChild(b);
    }
    figure.appendChild(bar);
  }

  function setUp() {
    document.querySelectorAll("figure.chart").forEach(addButtons);
  }

  window.qoelabFigures = { png, svg, spec };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
