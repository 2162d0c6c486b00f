// Agent configuration's agentk half: keeps a GetConfiguration stream open to kas (over the tunnel's
// gRPC channel), hands each new configuration to the modules (`deps.configuration`) and applies
// what agentk itself reads live: its log level.
import * as grpc from "@grpc/grpc-js";
import { Counter } from "prom-client";
import {
  AgentConfigurationServiceClient,
  type GetConfigurationResponse,
} from "../../../proto/gen/agent_configuration/v1/agent_configuration.ts";
import type { LogLevel } from "../../../tool/config/values.ts";
import { AgentConfigurationError, deserializeAgentConfiguration } from "../../agentcfg/index.ts";
import {
  type AgentkModuleFactory,
  DEFAULT_STREAM_BACKOFF,
  followStreams,
  Phase,
  type StreamBackoff,
  streamEnd,
  waitForReady,
} from "../../runtime/index.ts";

export interface AgentConfigurationAgentOptions {
  /** The level from --log-level: agentk's level until its configuration file sets one. */
  logLevel: LogLevel;
  /** Reconnect delays after a stream ends (the channel itself waits for a tunnel). */
  backoff?: StreamBackoff;
}

export function agentConfigurationAgentModule(options: AgentConfigurationAgentOptions): AgentkModuleFactory {
  const backoff = options.backoff ?? DEFAULT_STREAM_BACKOFF;
  return {
    name: "agent_configuration",
    phase: Phase.capability,
    create({ kasRpc, log, registry, configuration }) {
      const updates = new Counter({
        name: "agentk_configuration_updates_total",
        help: "Configurations received from kas, by result (applied, invalid: kept the previous one).",
        labelNames: ["result"],
        registers: [registry],
      });
      // The address and credentials are ignored: calls go over `kasRpc`, inside the tunnel.
      const client = new AgentConfigurationServiceClient("kas", grpc.credentials.createInsecure(), {
        channelOverride: kasRpc,
      });
      let commitId = "";

      const apply = (message: GetConfigurationResponse) => {
        let received: ReturnType<typeof deserializeAgentConfiguration>;
        try {
          received = deserializeAgentConfiguration(message.configurationJson);
        } catch (err) {
          if (!(err instanceof AgentConfigurationError)) throw err;
          updates.inc({ result: "invalid" });
          log.warn(
            { commitId: message.commitId, err: err.message },
            "agent configuration from kas refused; keeping the previous one",
          );
          return;
        }
        commitId = message.commitId;
        // No file (commit ""): the level from the flag; a file: its level (GitLab's default, info).
        log.level = commitId === "" ? options.logLevel : received.observability.logging.level;
        configuration.set(received);
        updates.inc({ result: "applied" });
        log.info({ commitId, logLevel: log.level }, "agent configuration applied");
      };

      /**
       * One stream, until kas ends it or the tunnel goes; resolves with whether it went well: it
       * brought something, lasted a while, or ended with OK (kas sends nothing to an agent that is
       * up to date, so silence is no failure).
       */
      const follow = (signal: AbortSignal) => {
        let received = false;
        const call = client.getConfiguration({ commitId }, waitForReady());
        call.on("data", (message: GetConfigurationResponse) => {
          received = true;
          apply(message);
        });
        return streamEnd(call, signal, {
          received: () => received,
          quiet: [grpc.status.UNAVAILABLE],
          log,
          message: "agent configuration stream failed",
        });
      };

      return {
        name: "agent_configuration",
        start(signal) {
          void followStreams(signal, backoff, follow);
        },
        // No client.close(): it would close the channel, which is agentk's and shared by every module.
      };
    },
  };
}
