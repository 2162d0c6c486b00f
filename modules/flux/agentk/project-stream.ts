// The stream of pushed projects from kas (GitLab's `GitLabFlux.ReconcileProjects`): one stream at a
// time for the projects agentk's Receivers follow, opened again after it ends (with backoff), and
// replaced when that set of projects changes, once the set has held still for a moment (GitLab's
// debounce: a cluster's Receivers arriving one by one open one stream, not one each).
import * as grpc from "@grpc/grpc-js";
import type { GitLabFluxClient } from "../../../proto/gen/flux/v1/gitlab_flux_rpc.ts";
import type { Logger } from "../../../tool/observability/index.ts";
import { followStreams, type StreamBackoff, streamEnd, waitForReady } from "../../runtime/index.ts";

/** GitLab's: a new set of projects is asked for once it has held still this long. */
export const DEFAULT_DEBOUNCE_MS = 10_000;

export interface ProjectStreamOptions {
  client: GitLabFluxClient;
  backoff: StreamBackoff;
  debounceMs: number;
  log: Logger;
  /** The number of projects the open stream follows (0 while none is open). */
  following(count: number): void;
  /** kas says `project` was pushed to. */
  onPushed(project: string): void;
}

export class ProjectStream {
  readonly #o: ProjectStreamOptions;
  #wanted: string[] = [];
  #asked: string[] = [];
  #debounce: ReturnType<typeof setTimeout> | undefined;
  /** Ends the open stream (or the wait for projects) so that the next one asks for #asked. */
  #replace = new AbortController();
  #stopped = false;

  constructor(options: ProjectStreamOptions) {
    this.#o = options;
  }

  /** The projects to follow now (sorted, unique); asked for after the debounce. */
  setProjects(projects: string[]): void {
    if (this.#stopped) return;
    this.#wanted = projects;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      if (same(this.#wanted, this.#asked)) return;
      this.#asked = this.#wanted;
      this.#replace.abort();
    }, this.#o.debounceMs);
    this.#debounce.unref();
  }

  /** Follows kas until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    signal.addEventListener(
      "abort",
      () => {
        this.#stopped = true;
        clearTimeout(this.#debounce);
      },
      { once: true },
    );
    await followStreams(signal, this.#o.backoff, (s) => this.#stream(s));
    this.#o.following(0);
  }

  async #stream(signal: AbortSignal): Promise<boolean> {
    if (this.#replace.signal.aborted) this.#replace = new AbortController();
    const replaced = this.#replace.signal;
    const ends = AbortSignal.any([signal, replaced]);
    const projects = this.#asked;
    if (projects.length === 0) {
      // Nothing to follow: wait for projects (a stream of none would bring nothing).
      this.#o.following(0);
      await new Promise((resolve) => ends.addEventListener("abort", resolve, { once: true }));
      return true;
    }
    const call = this.#o.client.reconcileProjects(
      { project: projects.map((id) => ({ id })) },
      waitForReady(),
    );
    let received = false;
    call.on("data", (response: { project?: { id: string } }) => {
      received = true;
      const id = response.project?.id;
      if (id) this.#o.onPushed(id);
    });
    this.#o.following(projects.length);
    this.#o.log.debug({ projects: projects.length }, "flux: following pushes of the Receivers' projects");
    const healthy = await streamEnd(call, ends, {
      received: () => received,
      quiet: [grpc.status.UNAVAILABLE, grpc.status.CANCELLED],
      log: this.#o.log,
      message: "flux: the stream of pushed projects failed",
    });
    this.#o.following(0);
    // Replaced by a new set of projects: that went well, the next stream opens after the shortest delay.
    return healthy || replaced.aborted;
  }
}

function same(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
