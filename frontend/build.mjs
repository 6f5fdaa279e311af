// Copies vendored npm files and our own sources into dist/, which Django serves as static files.
// No bundler: the browser loads Chart.js's UMD build and our plain scripts with <script> tags.
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

// [from (relative to node_modules), to (relative to dist)]
const vendored = [
  ["chart.js/dist/chart.umd.min.js", "vendor/chart.js/chart.umd.min.js"],
  ["chart.js/dist/chart.umd.min.js.map", "vendor/chart.js/chart.umd.min.js.map"],
  ["chart.js/LICENSE.md", "vendor/chart.js/LICENSE.md"],
];

rmSync(dist, { recursive: true, force: true });
for (const [from, to] of vendored) {
  const src = join(here, "node_modules", from);
  if (!existsSync(src)) {
    console.error(`missing ${src}: run 'npm ci' in frontend/ first`);
    process.exit(1);
  }
  mkdirSync(dirname(join(dist, to)), { recursive: true });
  cpSync(src, join(dist, to));
}
// Our sources keep their names under dist/qoelab/ so templates refer to {% static 'qoelab/…' %}.
mkdirSync(join(dist, "qoelab"), { recursive: true });
const ours = readdirSync(join(here, "src")).filter((f) => /\.(js|css|svg)$/.test(f));
for (const f of ours) cpSync(join(here, "src", f), join(dist, "qoelab", f));
// noVNC (live mode, VNC): its ES-module core and the pako inflater it imports, loaded by the
// evaluator page with <script type="module">; directory layout kept so relative imports resolve.
const novnc = join(here, "node_modules", "@novnc", "novnc");
if (!existsSync(join(novnc, "core", "rfb.js"))) {
  console.error(`missing ${novnc}/core: run 'npm ci' in frontend/ first`);
  process.exit(1);
}
for (const part of ["core", "vendor", "LICENSE.txt"]) {
  cpSync(join(novnc, part), join(dist, "vendor", "novnc", part), { recursive: true });
}
// spice-html5 (live mode, SPICE) is not on npm under that name: Debian's package 'spice-html5'
// (0.3.0) ships its ES modules in /usr/share/spice-html5. Without it the SPICE live client is
// missing and the evaluator page says so; everything else still builds.
const spiceSrc = process.env.SPICE_HTML5_DIR || "/usr/share/spice-html5";
let spice = "spice-html5 not found (install the Debian package 'spice-html5')";
if (existsSync(join(spiceSrc, "main.js"))) {
  cpSync(spiceSrc, join(dist, "vendor", "spice-html5"), {
    recursive: true,
    dereference: true,
    filter: (src) => !/\.html$/.test(src),
  });
  spice = `spice-html5 from ${spiceSrc}`;
}
console.log(`dist/: ${vendored.length} vendored files, noVNC core, ${spice}, ${ours.length} sources`);
