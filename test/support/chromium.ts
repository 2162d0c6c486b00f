import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's chromium package. */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * A real headless Chromium (Debian's) driven by playwright-core, with a fresh profile. Chromium's
 * own background traffic is off: on a closed network it would only fail, and slow the page.
 */
export class Chromium {
  private constructor(
    readonly context: BrowserContext,
    readonly profile: string,
  ) {}

  static async launch(): Promise<Chromium> {
    const profile = await mkdtemp(join(tmpdir(), "chromium-test-"));
    try {
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        timeout: 30_000,
        viewport: { width: 1280, height: 800 },
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      });
      return new Chromium(context, profile);
    } catch (err) {
      await rm(profile, { recursive: true, force: true });
      throw err;
    }
  }

  page(): Promise<Page> {
    return this.context.newPage();
  }

  async close(): Promise<void> {
    await this.context.close();
    await rm(this.profile, { recursive: true, force: true });
  }
}
