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
console.log(`dist/: ${vendored.length} vendored files, ${ours.length} sources`);
