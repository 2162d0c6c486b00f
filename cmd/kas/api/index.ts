export {
  ApiAuthError,
  createGitLabJwtVerifier,
  GITLAB_JWT_AUDIENCE,
  GITLAB_JWT_ISSUER,
  GITLAB_REQUEST_HEADER,
} from "./gitlab-jwt.ts";
export { AGENTS_ROUTE, type ApiServerOptions, SERVICE_ROUTE, serveApi } from "./server.ts";
