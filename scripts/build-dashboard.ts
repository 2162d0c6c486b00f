// npm run build, second step: the dashboard page's bundle next to the compiled kas, so that the
// built package serves it without esbuild.
import { mkdir, writeFile } from "node:fs/promises";
import { bundleDashboard } from "../modules/dashboard/kas/assets.ts";

const out = new URL("../dist/modules/dashboard/web/", import.meta.url);
await mkdir(out, { recursive: true });
const assets = await bundleDashboard();
for (const [name, content] of Object.entries(assets)) await writeFile(new URL(name, out), content);
console.log(`dashboard bundle: ${Object.keys(assets).join(", ")} in ${out.pathname}`);
