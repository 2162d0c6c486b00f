// One GetObjectsToSynchronize call: the calling agent's manifest project, checked by ProjectAccess,
// sent commit by commit (header, the files in chunks of at most 1 MiB, trailer) whenever the ref
// moves away from what the agent has; a refusal or a limit ends the stream with its status and is
// recorded for GitLab's API.
import * as grpc from "@grpc/grpc-js";
import type {
  GetObjectsToSynchronizeRequest,
  GetObjectsToSynchronizeResponse,
} from "../../../proto/gen/gitops/v1/gitops.ts";
import {
  type AgentIdentity,
  type AgentRpc,
  callingAgent,
  ProjectAccessError,
  type ProjectRepository,
  type RefSelector,
  RepositoryError,
  WorkAbort,
} from "../../runtime/index.ts";
import { describeRef, type ManifestFile, Refusal, readManifests } from "./manifests.ts";
import { MAX_CHUNK_BYTES, MAX_PROJECT, requestProblem } from "./requests.ts";
import { ACCESS_STATUS, type GitopsServiceDeps, statusError } from "./service-deps.ts";
import type { RefEvent } from "./watches.ts";

type Call = grpc.ServerWritableStream<GetObjectsToSynchronizeRequest, GetObjectsToSynchronizeResponse>;
type Session = ReturnType<AgentRpc["agentOf"]>;

/** Serves one call until the stream ends (the client, the tunnel, or a refusal). */
export function serveManifestStream(call: Call, deps: GitopsServiceDeps): void {
  const session = callingAgent(deps.rpc, call, (err) => call.emit("error", err));
  if (!session) return;
  const stream = new ManifestStream(call, session, deps);
  stream.run().catch((err: unknown) => {
    deps.log.error({ err, agentId: stream.agent.agentId, project: stream.project }, "GitOps stream failed");
    stream.refuse(new Refusal(grpc.status.INTERNAL, "kas failed to serve the manifests"));
  });
}

class ManifestStream {
  readonly agent: AgentIdentity;
  readonly project: string;
  readonly #call: Call;
  readonly #session: Session;
  readonly #deps: GitopsServiceDeps;
  readonly #ref: RefSelector;
  readonly #globs: string[];
  /** Aborts the lookups, reads and waits in flight when the stream ends (no controller while idle). */
  readonly #abort = new WorkAbort();
  #open = true;
  #unsubscribe = () => {};
  /** The commit the agent has. */
  #has: string;
  /** The ref's latest commit, as the watch last said. */
  #latest: string | undefined;
  #pumping = false;

  constructor(call: Call, session: Session, deps: GitopsServiceDeps) {
    this.#call = call;
    this.#session = session;
    this.#deps = deps;
    this.agent = session.identity;
    const req = call.request;
    this.project = req.projectId;
    this.#ref = refOf(req.ref);
    this.#globs = req.paths.map((p) => p.glob);
    this.#has = req.commitId.slice(0, 64);
    deps.metrics.streams.inc();
    call.on("cancelled", this.#done);
    call.on("close", this.#done);
    call.on("finish", this.#done);
    session.on("close", this.#end); // #done takes it off (`once` would add a wrapper per stream)
  }

  readonly #done = () => {
    if (!this.#open) return;
    this.#open = false;
    this.#deps.metrics.streams.dec();
    this.#abort.abort(new Error("the stream ended"));
    this.#unsubscribe();
    this.#session.off("close", this.#end);
  };

  readonly #end = () => {
    if (!this.#open) return;
    this.#done();
    this.#call.end();
  };

  /** Ends the stream with a status, recorded for GitLab's API. */
  refuse(refusal: Refusal, commitId?: string): void {
    if (!this.#open) return;
    this.#done();
    const { metrics, log, store } = this.#deps;
    const { agent, project } = this;
    metrics.refusals.inc({ code: refusal.codeName });
    log.info(
      { agentId: agent.agentId, project, code: refusal.codeName, reason: refusal.message },
      "GitOps manifests refused",
    );
    if (project !== "" && project.length <= MAX_PROJECT) {
      void store.put(agent.agentId, project, "problem", {
        kind: "refused",
        code: refusal.codeName,
        message: refusal.message,
        ...(commitId && { commitId }),
        at: new Date().toISOString(),
      });
    }
    this.#call.emit("error", statusError(refusal.code, refusal.message));
  }

  /** Checks the request and the project's access, then follows the ref. */
  async run(): Promise<void> {
    const problem = requestProblem(this.project, this.#globs, this.#ref, this.#deps.config.maxNumberOfPaths);
    if (problem) return this.refuse(problem);
    let repo: ProjectRepository;
    try {
      repo = await this.#deps.projects.repositoryFor(this.agent, this.project, this.#abort.acquire());
    } catch (err) {
      if (!this.#open) return;
      if (err instanceof ProjectAccessError)
        return this.refuse(new Refusal(ACCESS_STATUS[err.code], err.message));
      throw err;
    } finally {
      this.#abort.release();
    }
    if (!this.#open) return;
    this.#unsubscribe = this.#deps.watches.subscribe(
      {
        location: repo.location,
        ref: this.#ref,
        agentId: this.agent.agentId,
        projectNames: projectNames(this.project, repo),
      },
      (event) => this.#onRefEvent(repo, event),
    );
    if (!this.#open) this.#unsubscribe();
  }

  #onRefEvent(repo: ProjectRepository, event: RefEvent): void {
    if (!this.#open) return;
    const { project } = this;
    if (!event.ok) {
      const err = event.error;
      if (err instanceof RepositoryError && err.code === "not_found") {
        this.refuse(
          new Refusal(
            grpc.status.NOT_FOUND,
            `project ${JSON.stringify(project)}: its repository does not exist`,
          ),
        );
        return;
      }
      // The watch polls again soon, backing off; the agent keeps what it has meanwhile.
      void this.#deps.store.put(this.agent.agentId, project, "problem", {
        kind: "repository",
        message: `cannot poll ${describeRef(this.#ref)}: ${(err as Error)?.message ?? String(err)}`,
        at: new Date().toISOString(),
      });
      return;
    }
    if (event.commit === undefined) {
      this.refuse(
        new Refusal(
          grpc.status.FAILED_PRECONDITION,
          `project ${JSON.stringify(project)}: ${describeRef(this.#ref)} does not exist`,
        ),
      );
      return;
    }
    this.#latest = event.commit;
    void this.#pump(repo);
  }

  /** Sends commits until the agent has the latest one (one pump at a time). */
  async #pump(repo: ProjectRepository): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    const { repositories, config, log } = this.#deps;
    const ctx = { agentId: this.agent.agentId, signal: this.#abort.acquire() };
    try {
      while (this.#open && this.#latest !== undefined && this.#latest !== this.#has) {
        const commit = this.#latest;
        let files: ManifestFile[];
        try {
          files = await readManifests(repositories, repo.location, commit, this.#globs, config, ctx);
        } catch (err) {
          if (!this.#open) return;
          if (err instanceof Refusal) return this.refuse(err, commit);
          // The commit could not be read: the agent asks again (backing off) and gets it then.
          const message = `cannot read the manifests of ${describeRef(this.#ref)} at commit ${commit}: ${(err as Error).message}`;
          return this.refuse(new Refusal(grpc.status.UNAVAILABLE, message), commit);
        }
        await this.#sendCommit(repo, commit, files);
        this.#has = commit;
      }
    } catch (err) {
      if (this.#open)
        log.error({ err, agentId: this.agent.agentId, project: this.project }, "GitOps stream failed");
      if (this.#open) this.refuse(new Refusal(grpc.status.INTERNAL, "kas failed to send the manifests"));
    } finally {
      this.#abort.release();
      this.#pumping = false;
    }
  }

  /** Header, the files in chunks, trailer; then recorded as sent. */
  async #sendCommit(repo: ProjectRepository, commit: string, files: ManifestFile[]): Promise<void> {
    const { agent, project } = this;
    const { metrics, store } = this.#deps;
    const numericId =
      repo.projectId !== "" ? repo.projectId : /^[1-9]\d{0,18}$/.test(project) ? project : "0";
    await this.#send({ header: { commitId: commit, projectId: numericId, agentId: agent.agentId } });
    for (const file of files) {
      // An empty file is one empty object; a big one spans consecutive objects with its source.
      for (let at = 0; at === 0 || at < file.data.length; at += MAX_CHUNK_BYTES) {
        await this.#send({
          object: { source: file.path, data: file.data.subarray(at, at + MAX_CHUNK_BYTES) },
        });
      }
    }
    await this.#send({ trailer: {} });
    metrics.commitsSent.inc();
    this.#deps.syncs?.inc();
    const bytes = files.reduce((n, f) => n + f.data.length, 0);
    await store.put(agent.agentId, project, "sent", {
      commitId: commit,
      projectId: repo.projectId,
      files: files.length,
      bytes,
      at: new Date().toISOString(),
    });
    await store.clear(agent.agentId, project, "problem");
  }

  /** Resolves when the message is taken, or once the client reads again after it was not. */
  async #send(message: GetObjectsToSynchronizeResponse): Promise<void> {
    if (!this.#open) throw this.#abort.reason;
    if (this.#call.write(message)) return;
    const signal = this.#abort.acquire();
    try {
      await new Promise<void>((resolve) => {
        const go = () => {
          this.#call.off("drain", go);
          signal.removeEventListener("abort", go);
          resolve();
        };
        this.#call.on("drain", go);
        if (signal.aborted) go();
        else signal.addEventListener("abort", go, { once: true });
      });
    } finally {
      this.#abort.release();
    }
    if (!this.#open) throw this.#abort.reason;
  }
}

/** The request's ref as a RefSelector (none: the default branch). */
function refOf(ref: { branch?: string; tag?: string; commit?: string } | undefined): RefSelector {
  if (ref?.branch !== undefined) return { branch: ref.branch };
  if (ref?.tag !== undefined) return { tag: ref.tag };
  if (ref?.commit !== undefined) return { commit: ref.commit };
  return {};
}

/** The names a push notification may give the project: its numeric id, its full path(s). */
function projectNames(requested: string, repo: ProjectRepository): string[] {
  const names = [requested];
  if (repo.projectId !== "") names.push(repo.projectId);
  if (repo.location.backend === "gitaly") names.push(repo.location.repository.glProjectPath);
  return names;
}
