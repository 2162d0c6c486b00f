// kas's Gitaly backend for RepositoryReader.

export { GitalyAddressError, parseGitalyAddress } from "./address.ts";
export { gitalyAuthorization } from "./auth.ts";
export { GitalyRepositories, type GitalyRepositoriesOptions } from "./gitaly-repositories.ts";
export { featureMetadataKey, gitalyCallMetadata } from "./metadata.ts";
