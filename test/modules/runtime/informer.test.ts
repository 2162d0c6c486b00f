// RetryingInformer stopped mid-start, against the Kubernetes test server through client-node's
// real Watch: no watch outlives the stop (one that did held agentk open after its shutdown).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  KubeConfig,
  type KubernetesListObject,
  KubernetesObjectApi,
  type V1ConfigMap,
  Watch,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, test } from "vitest";
import { RetryingInformer } from "../../../modules/runtime/informer.ts";
import { createLogger } from "../../../tool/observability/index.ts";
import { type KubeApiServer, startKubeApiServer } from "../../support/kube-apiserver.ts";
import { within } from "../../support/until.ts";

let api: KubeApiServer;
let dir: string;
let kc: KubeConfig;
beforeAll(async () => {
  api = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), "informer-"));
  kc = new KubeConfig();
  kc.loadFromFile(await api.writeKubeconfig(join(dir, "kubeconfig")));
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

const PATH = "/api/v1/namespaces/default/configmaps";
const list = () =>
  KubernetesObjectApi.makeApiClient(kc).list("v1", "ConfigMap", "default") as Promise<
    KubernetesListObject<V1ConfigMap>
  >;
const informer = (source: { list: typeof list; watch: Pick<Watch, "watch"> }) =>
  new RetryingInformer<V1ConfigMap>(
    { path: PATH, resource: "configmaps", ...source },
    { add() {}, update() {}, delete() {} },
    { log: createLogger({ level: "silent" }), backoff: { initialMs: 10, maxMs: 10 } },
  );
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

test("stopped while its list is under way: no watch is opened after the list", async () => {
  const listing = gate();
  const listed = gate();
  const returned = gate();
  const watches: string[] = [];
  const real = new Watch(kc);
  const i = informer({
    list: async () => {
      listing.open();
      await listed.opened;
      const result = await list();
      returned.open();
      return result;
    },
    watch: {
      watch: (...args) => {
        watches.push(args[0]);
        return real.watch(...args);
      },
    },
  });
  i.start();
  await within(listing.opened, 5000, "the list to begin");
  i.stop();
  listed.open();
  await within(returned.opened, 5000, "the list to return");
  // ListWatch asks for its watch in the microtasks after the list returns: all run before this.
  await new Promise((resolve) => setImmediate(resolve));
  expect(watches).toEqual([]);
});

test("stopped while its watch is being opened: that watch is aborted once it is", async () => {
  const opening = gate();
  const stopped = gate();
  const aborted = gate();
  const real = new Watch(kc);
  let request: AbortController | undefined;
  const i = informer({
    list,
    watch: {
      watch: async (...args) => {
        opening.open();
        const r = await real.watch(...args); // the request is open on the server
        await stopped.opened;
        request = r;
        r.signal.addEventListener("abort", aborted.open);
        return r;
      },
    },
  });
  i.start();
  await within(opening.opened, 5000, "the watch to be asked for");
  i.stop();
  stopped.open();
  await within(aborted.opened, 5000, "the watch to be aborted");
  expect(request?.signal.aborted).toBe(true);
});
