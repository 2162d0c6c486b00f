// Leader election among an agent's agentk replicas with a Kubernetes Lease, as client-go's
// leaderelection does it: whoever holds an unexpired lease leads; the leader renews it every
// retry period; a replica that cannot renew within the renew deadline stops leading; a lease not
// renewed for its duration may be taken over. Optimistic concurrency (resourceVersion) decides races.
import { EventEmitter } from "node:events";
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";
import type { LeaderElection } from "./index.ts";

export type LeaseApi = Pick<
  CoordinationV1Api,
  "readNamespacedLease" | "createNamespacedLease" | "replaceNamespacedLease"
>;

export interface LeaseElectorOptions {
  api: LeaseApi;
  namespace: string;
  /** The Lease's name: one per agent. */
  name: string;
  /** This replica (its pod name). */
  identity: string;
  /** A lease not renewed this long may be taken over. Whole seconds on the wire. Default 15 s. */
  leaseDurationMs?: number;
  /** A leader that could not renew for this long stops leading. Default 10 s. */
  renewDeadlineMs?: number;
  /** How often to try to acquire or renew. Default 2 s. */
  retryPeriodMs?: number;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

export class LeaseElector extends EventEmitter<{ elected: []; lost: [] }> implements LeaderElection {
  readonly #o: Required<Omit<LeaseElectorOptions, "log">> & Pick<LeaseElectorOptions, "log">;
  #leading = false;
  #lastRenewal = 0;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #closed = false;

  constructor(options: LeaseElectorOptions) {
    super();
    this.#o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...options };
    const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = this.#o;
    if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > retryPeriodMs && retryPeriodMs > 0)) {
      throw new RangeError("lease elector: need leaseDuration > renewDeadline > retryPeriod > 0");
    }
  }

  get leading(): boolean {
    return this.#leading;
  }

  start(): void {
    if (this.#closed || this.#timer || this.#running) return;
    this.#tick();
  }

  /** Stops electing; a leader releases the lease so another replica takes over at once. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    // The release is a courtesy (without it the lease expires on its own), so shutdown waits for
    // the attempt under way and the release for the renew deadline at most.
    const release = (async () => {
      await this.#running;
      if (!this.#leading) return;
      this.#setLeading(false);
      await this.#release();
    })();
    await within(release, this.#o.renewDeadlineMs, "releasing the lease").catch((err: unknown) =>
      this.#o.log?.warn({ err, lease: this.#o.name }, "cannot release the leader lease"),
    );
    this.#setLeading(false);
  }

  #tick(): void {
    // An attempt the API server never answers counts as failed at the renew deadline, so a leader
    // whose requests hang stops leading, as one whose requests fail does.
    this.#running = within(this.#tryAcquireOrRenew(), this.#o.renewDeadlineMs, "lease request")
      .then(
        (held) => {
          if (held) {
            this.#lastRenewal = Date.now();
            this.#setLeading(true);
          } else this.#expire();
        },
        (err: unknown) => {
          this.#o.log?.warn({ err, lease: this.#o.name }, "leader lease request failed");
          this.#expire();
        },
      )
      .finally(() => {
        this.#running = undefined;
        if (!this.#closed) this.#timer = setTimeout(() => this.#tick(), this.#o.retryPeriodMs);
      });
  }

  /** A leader that has not renewed within the renew deadline stops leading. */
  #expire(): void {
    if (this.#leading && Date.now() - this.#lastRenewal >= this.#o.renewDeadlineMs) this.#setLeading(false);
  }

  #setLeading(leading: boolean): void {
    if (this.#leading === leading) return;
    this.#leading = leading;
    this.#o.log?.info(
      { lease: this.#o.name, identity: this.#o.identity },
      leading ? "became leader" : "stopped leading",
    );
    this.emit(leading ? "elected" : "lost");
  }

  /** True when this replica holds the lease after the attempt. */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const { api, name, namespace, identity } = this.#o;
    const now = new Date();
    const seconds = Math.max(1, Math.round(this.#o.leaseDurationMs / 1000));
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      const spec = {
        holderIdentity: identity,
        leaseDurationSeconds: seconds,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: 0,
      };
      return api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } }).then(
        () => true,
        (e: unknown) => (statusOf(e) === 409 ? false : Promise.reject(e)),
      );
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewed + (spec.leaseDurationSeconds ?? 0) * 1000 <= now.getTime();
    if (holder !== "" && holder !== identity && !expired) return false;
    const takeover = holder !== identity;
    const body: V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: seconds,
        renewTime: now,
        ...(takeover && { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
      },
    };
    // resourceVersion travels in metadata: a concurrent writer makes this a 409, and someone else leads.
    return api.replaceNamespacedLease({ name, namespace, body }).then(
      () => true,
      (e: unknown) => (statusOf(e) === 409 ? false : Promise.reject(e)),
    );
  }

  /** As client-go's ReleaseOnCancel: the lease says nobody holds it, so no one waits out its duration. */
  async #release(): Promise<void> {
    const { api, name, namespace, identity } = this.#o;
    const lease = await api.readNamespacedLease({ name, namespace });
    if (lease.spec?.holderIdentity !== identity) return;
    const now = new Date();
    await api.replaceNamespacedLease({
      name,
      namespace,
      body: {
        ...lease,
        spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: now },
      },
    });
  }
}

/** `promise`, or a rejection naming `what` once `ms` have passed. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" ? code : undefined;
}
