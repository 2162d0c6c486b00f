import { readFile } from "node:fs/promises";
import { SignJWT } from "jose";
import { describeJwtError, verifyShortLivedJwt } from "../jwt/short-lived.ts";

export const DEFAULT_PEER_ISSUER = "gitlab-kas";
export const DEFAULT_PEER_AUDIENCE = "gitlab-kas";
const MIN_SECRET_BYTES = 32;

export interface PeerAuthOptions {
  /** The secret every replica shares (HS256 key), at least 32 bytes. */
  secret: Uint8Array;
  issuer?: string;
  audience?: string;
  /** Lifetime of each token; a fresh one is signed per dial. Default 60 s. */
  tokenTtlSec?: number;
  /** Clock skew tolerated between replicas when verifying. Default 5 s. */
  clockToleranceSec?: number;
  /**
   * Longest lifetime (`exp - iat`) a presented token may have. Default 90 s: a little above the
   * 60 s every replica signs with. A token without `exp`, or living longer, is refused: replicas
   * sign a fresh one per dial, so only a token minted to be kept would need more.
   */
  maxTokenLifetimeSec?: number;
}

/**
 * Reads the shared secret file: base64 (surrounding whitespace ignored), as kas's
 * `authentication_secret_file` is. Read once, at start.
 */
export async function readSecretFile(path: string): Promise<Uint8Array> {
  const text = (await readFile(path, "utf8")).trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw new Error(`secret file ${path} is not base64`);
  const secret = Buffer.from(text, "base64");
  checkSecret(secret, `secret file ${path}`);
  return secret;
}

/** Signs and checks the HS256 JWTs kas replicas present to each other's private API. */
export class PeerAuth {
  readonly #secret: Uint8Array;
  readonly #issuer: string;
  readonly #audience: string;
  readonly #ttlSec: number;
  readonly #toleranceSec: number;
  readonly #maxLifetimeSec: number;

  constructor(options: PeerAuthOptions) {
    checkSecret(options.secret, "peer secret");
    this.#secret = options.secret;
    this.#issuer = options.issuer ?? DEFAULT_PEER_ISSUER;
    this.#audience = options.audience ?? DEFAULT_PEER_AUDIENCE;
    this.#ttlSec = options.tokenTtlSec ?? 60;
    this.#toleranceSec = options.clockToleranceSec ?? 5;
    this.#maxLifetimeSec = options.maxTokenLifetimeSec ?? 90;
    if (this.#ttlSec > this.#maxLifetimeSec)
      throw new Error(`peer token lifetime ${this.#ttlSec}s is above the ${this.#maxLifetimeSec}s accepted`);
  }

  /** A fresh token naming `subject` (the dialing replica). */
  sign(subject: string): Promise<string> {
    return new SignJWT({})
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer(this.#issuer)
      .setAudience(this.#audience)
      .setSubject(subject)
      .setIssuedAt()
      .setExpirationTime(`${this.#ttlSec}s`)
      .sign(this.#secret);
  }

  /** The subject of a valid token; throws PeerTokenError otherwise (the reason is safe to log). */
  async verify(token: string): Promise<string> {
    try {
      const payload = await verifyShortLivedJwt(token, this.#secret, {
        issuer: this.#issuer,
        audience: this.#audience,
        maxLifetimeSec: this.#maxLifetimeSec,
        clockToleranceSec: this.#toleranceSec,
      });
      return payload.sub ?? "";
    } catch (err) {
      throw new PeerTokenError(describe(err), { cause: err });
    }
  }
}

export class PeerTokenError extends Error {
  override name = "PeerTokenError";
}

function describe(err: unknown): string {
  const reason = describeJwtError(err);
  return reason === "expired" || reason === "malformed" ? `${reason} token` : reason;
}

function checkSecret(secret: Uint8Array, what: string): void {
  if (secret.length < MIN_SECRET_BYTES) {
    throw new Error(`${what} must be at least ${MIN_SECRET_BYTES} bytes, got ${secret.length}`);
  }
}
