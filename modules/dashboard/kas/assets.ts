// The dashboard page's script and styles. `npm run build` bundles them (esbuild) next to the
// compiled server (dist/modules/dashboard/web/app.{js,css}); run from source, kas bundles them
// once when the dashboard starts. Either way they are served from memory.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

export interface DashboardAssets {
  "app.js": Buffer;
  "app.css": Buffer;
}

const BUILT = new URL("../web/", import.meta.url);
const ENTRY = fileURLToPath(new URL("../web/main.ts", import.meta.url));

export async function loadDashboardAssets(): Promise<DashboardAssets> {
  try {
    const [js, css] = await Promise.all([
      readFile(new URL("app.js", BUILT)),
      readFile(new URL("app.css", BUILT)),
    ]);
    return { "app.js": js, "app.css": css };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    return bundleDashboard();
  }
}

/** Bundles web/main.ts (and the CSS it imports) with esbuild, in memory. */
export async function bundleDashboard(): Promise<DashboardAssets> {
  // Only needed without a prebuilt bundle (development): not a dependency of the built package.
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: { app: ENTRY },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2020",
    outdir: "/bundle",
    write: false,
    logLevel: "silent",
    legalComments: "none",
  });
  const file = (name: string) => {
    const out = result.outputFiles.find((f) => f.path === `/bundle/${name}`);
    if (!out) throw new Error(`esbuild produced no ${name}`);
    return Buffer.from(out.contents);
  };
  return { "app.js": file("app.js"), "app.css": file("app.css") };
}
