// kas's `action_cable` section: where GitLab's ActionCable listens for broadcasts (its Redis
// subscription adapter's Redis), and the channel prefix of its cable.yml. Off unless redis_url is set.
import { z } from "zod";
import { countSetting, fileSetting, stringSetting } from "../../../tool/config/kinds.ts";
import { setting } from "../../../tool/config/settings.ts";
import { parseUrl } from "../../../tool/config/values.ts";

export const actionCableKasSection = z.object({
  redisUrl: setting((v) => parseUrl(v, ["redis", "rediss"]), {
    kind: "URL",
    doc: "The Redis of GitLab's ActionCable (cable.yml's url, without credentials: see password_file). Set: every cluster view event is broadcast to `cluster_agent:<agent id>`. Unset: no broadcasts.",
  }),
  passwordFile: fileSetting({ doc: "Password of ActionCable's Redis." }),
  channelPrefix: stringSetting({
    doc: "cable.yml's channel_prefix: broadcasts go to the Redis channel `<prefix>:cluster_agent:<agent id>`.",
  }),
  maxPending: countSetting({
    default: 1000,
    doc: "Broadcasts waiting for ActionCable's Redis at most; beyond that (Redis slow or away) events are dropped and counted.",
  }),
});

export type ActionCableKasConfig = z.output<typeof actionCableKasSection>;
