export {
  ApiAuthError,
  createGitLabJwtVerifier,
  GITLAB_JWT_AUDIENCE,
  GITLAB_JWT_ISSUER,
  GITLAB_REQUEST_HEADER,
} from "./gitlab-jwt.ts";
export {
  bearerToken,
  createGitLabRpcServer,
  type GitLabRpcServer,
  type GitLabRpcServerOptions,
} from "./gitlab-rpc.ts";
export { ApiRouteTable, type ApiServerOptions, serveApi } from "./server.ts";
