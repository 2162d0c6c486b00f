// kas's `dashboard` section: the live cluster views page on a listener of its own. Off unless
// dashboard.listen.address is set; a token is required unless it listens on loopback only.
import { isIP } from "node:net";
import { z } from "zod";
import {
  addressSetting,
  checkTlsPair,
  countSetting,
  durationAtLeast,
  fileSetting,
  tlsPair,
} from "../../../tool/config/kinds.ts";
import type { ListenAddress } from "../../../tool/config/values.ts";

export const dashboardKasSection = z
  .object({
    listen: z
      .object({
        address: addressSetting({
          doc: "Where the dashboard (a web page of every agent's cluster views, live) listens, e.g. 127.0.0.1:8156. Unset: no dashboard.",
        }),
        ...tlsPair,
      })
      .superRefine(checkTlsPair),
    tokenFile: fileSetting({
      doc: "File holding the token a browser gives on the dashboard's login page (exchanged for a signed session cookie). Required unless dashboard.listen.address is a loopback address.",
    }),
    sessionTtlMs: durationAtLeast("1m", "a session shorter than that logs its user out mid-look", {
      default: "12h",
      doc: "How long a dashboard login lasts (a logout ends it before, on every replica when kas has Redis).",
    }),
    sessionGeneration: countSetting({
      default: 1,
      doc: "Part of the dashboard session cookies' signing key: raise it (on every replica) to end every dashboard session at once. A new token_file token does too.",
    }),
  })
  .superRefine((section, ctx) => {
    const { address } = section.listen;
    if (address === undefined || typeof address.port !== "number") return;
    if (section.tokenFile === undefined && !isLoopback(address)) {
      ctx.addIssue({
        code: "custom",
        path: ["tokenFile"],
        message: `required when dashboard.listen.address is not a loopback address (${address.host ?? "every interface"}): the dashboard is never open to the network`,
      });
    }
  });

export type DashboardKasConfig = z.output<typeof dashboardKasSection>;

/** Only this machine can connect: 127.0.0.0/8, ::1, localhost. No host means every interface. */
export function isLoopback({ host }: ListenAddress): boolean {
  if (host === undefined) return false;
  const bare = host.replace(/^\[|\]$/g, "");
  if (bare === "localhost" || bare === "::1") return true;
  return isIP(bare) === 4 && bare.startsWith("127.");
}
