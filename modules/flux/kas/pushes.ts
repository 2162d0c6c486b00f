// One subscription to the git push notifications of every replica, fanned out to the open
// ReconcileProjects streams by project path: a push costs one map lookup, whatever the number of
// agents (GitLab.com sees thousands of pushes a minute).
import type { PushedProject } from "../../runtime/index.ts";

/** A push of a followed project: its full path, and its id when the push carried one. */
export type FollowedPush = PushedProject & { fullPath: string };

export type PushListener = (project: FollowedPush) => void;

export class PushFanout {
  readonly #byPath = new Map<string, Set<PushListener>>();

  /** Calls `listener` for each push of one of `paths`; returns a function that stops. */
  follow(paths: Iterable<string>, listener: PushListener): () => void {
    const followed = [...new Set(paths)];
    for (const p of followed) {
      const set = this.#byPath.get(p) ?? new Set<PushListener>();
      set.add(listener);
      this.#byPath.set(p, set);
    }
    return () => {
      for (const p of followed) {
        const set = this.#byPath.get(p);
        set?.delete(listener);
        if (set?.size === 0) this.#byPath.delete(p);
      }
    };
  }

  /** A push any replica was told of. Pushes named by numeric id only reach nobody (as in GitLab). */
  pushed(project: PushedProject): number {
    const { fullPath } = project;
    if (fullPath === undefined) return 0;
    const listeners = this.#byPath.get(fullPath);
    for (const l of listeners ?? []) l({ ...project, fullPath });
    return listeners?.size ?? 0;
  }
}
