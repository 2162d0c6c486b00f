import type { Module, ModuleFactory, Phase } from "./module.ts";

/** What a module that only serves a listener starts: where it is, and how to close it. */
export interface Listening {
  readonly url: string;
  /** First step of a stop, before `close`: keep serving, but wind kept-alive connections down. */
  drain?(): void;
  /** Graceful: no new connections, what is in flight gets `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/**
 * A module whose whole job is one listener (a front, the probes): `listen` binds it when the
 * module starts (undefined: nothing to serve, e.g. switched off), it is reported as `urls[urlName]`
 * and closed gracefully with the module.
 */
export function listenerModule<Deps>(
  name: string,
  phase: Phase,
  urlName: string,
  listen: (deps: Deps, signal: AbortSignal) => Promise<Listening | undefined>,
): ModuleFactory<Deps> {
  return {
    name,
    phase,
    create(deps): Module {
      let listener: Listening | undefined;
      return {
        name,
        get urls() {
          return listener ? { [urlName]: listener.url } : {};
        },
        async start(signal) {
          listener = await listen(deps, signal);
        },
        drain: () => listener?.drain?.(),
        close: async (graceMs) => listener?.close(graceMs),
      };
    },
  };
}
