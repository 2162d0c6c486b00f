import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";

/** The stream ids of the Kubernetes remote-command WebSocket protocol (`v4`/`v5.channel.k8s.io`). */
const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const ERROR = 3;
/** v5: the client closed one of its streams (the next byte says which). */
const CLOSE = 255;

const PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/**
 * `kubectl exec` over WebSocket (kubectl's default since 1.30): a few commands a test can rely on,
 * run by the server itself, as a container would run them. `echo ARGS` prints them; `cat` copies
 * stdin to stdout until the client closes stdin; `hostname` prints the pod's name; `sh -c "exit N"`
 * and `false` exit non-zero; `sh -c "echo ..."` echoes; anything else is "not found" (127). The
 * exit status arrives on the error stream as the real kubelet sends it.
 */
export class ExecServer {
  readonly #wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => PROTOCOLS.find((p) => offered.has(p)) ?? false,
  });

  /** Whether the request is a WebSocket exec this server takes. */
  static accepts(req: IncomingMessage): boolean {
    return (req.headers.upgrade ?? "").toLowerCase() === "websocket";
  }

  handle(req: IncomingMessage, socket: Duplex, head: Buffer, pod: { namespace: string; name: string }): void {
    const query = new URL(req.url ?? "/", "https://kube.test").searchParams;
    const command = query.getAll("command");
    this.#wss.handleUpgrade(req, socket, head, (ws) => run(ws, command, pod, query.get("stdin") === "true"));
  }

  close(): void {
    for (const ws of this.#wss.clients) ws.terminate();
    this.#wss.close();
  }
}

function run(
  ws: WebSocket,
  command: string[],
  pod: { namespace: string; name: string },
  stdin: boolean,
): void {
  const send = (stream: number, data: string | Buffer) =>
    ws.send(Buffer.concat([Buffer.from([stream]), Buffer.isBuffer(data) ? data : Buffer.from(data)]));
  const exit = (code: number) => {
    const status =
      code === 0
        ? { metadata: {}, status: "Success" }
        : {
            metadata: {},
            status: "Failure",
            message: `command terminated with non-zero exit code: error executing command [${command.join(" ")}], exit code ${code}`,
            reason: "NonZeroExitCode",
            details: { causes: [{ reason: "ExitCode", message: String(code) }] },
          };
    send(ERROR, JSON.stringify(status));
    ws.close(1000);
  };
  const [program, ...args] = command;
  const script = program === "sh" && args[0] === "-c" ? (args[1] ?? "").trim() : undefined;
  const exitCode = script === undefined ? undefined : /^exit (\d+)$/.exec(script)?.[1];
  const echoed = script === undefined ? undefined : /^echo (.*)$/.exec(script)?.[1];
  if (exitCode !== undefined) {
    exit(Number(exitCode));
  } else if (echoed !== undefined || program === "echo") {
    send(STDOUT, `${echoed ?? args.join(" ")}\n`);
    exit(0);
  } else if (program === "hostname") {
    send(STDOUT, `${pod.name}\n`);
    exit(0);
  } else if (program === "true" || (program === "cat" && !stdin)) {
    exit(0);
  } else if (program === "false") {
    exit(1);
  } else if (program === "cat") {
    ws.on("message", (data: Buffer) => {
      if (data[0] === STDIN) send(STDOUT, data.subarray(1));
      else if (data[0] === CLOSE && data[1] === STDIN) exit(0);
    });
  } else {
    send(STDERR, `${program ?? "sh"}: not found\n`);
    exit(127);
  }
}
