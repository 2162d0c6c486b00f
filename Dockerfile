# Images of kas and agentk, from one file (the last target, kas, is the default):
#   docker build --target kas -t kas .      docker build --target agentk -t agentk .
# NODE_IMAGE: any image with Node.js 20.18+ and npm at /usr/local/bin and a user with uid 1000.
ARG NODE_IMAGE=docker.io/library/node:20-bookworm-slim

# Compile TypeScript to dist/ and bundle the dashboard's page beside it. The compiler and the
# bundler (with the page's two libraries) alone, at the versions the lock file pins, and an emit
# without type checking (every file compiles on its own: isolatedModules); type checking is CI's job
# (npm run typecheck), and the emitted JavaScript is the same.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package-lock.json /tmp/
RUN npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error $(node -p ' \
      const locked = require("/tmp/package-lock.json").packages; \
      ["typescript", "@types/node", "tsx", "esbuild", "preact", "htm"].map((n) => `${n}@${locked[`node_modules/${n}`].version}`).join(" ")')
# package.json after the install (which would otherwise install everything it lists): its
# "type": "module" is what makes tsc emit ES modules.
COPY package.json tsconfig.json tsconfig.build.json ./
COPY proto proto
COPY lib lib
COPY tool tool
COPY modules modules
COPY cmd cmd
COPY scripts/build-dashboard.ts scripts/
# The .proto sources go beside the compiled code too: kas's gRPC server for GitLab serves reflection
# from them (dist/proto/<package>/..., where cmd/kas/api/gitlab-rpc.ts looks).
RUN node_modules/.bin/tsc -p tsconfig.build.json --noCheck --declaration false \
 && node_modules/.bin/tsx scripts/build-dashboard.ts \
 && node -e 'const fs = require("node:fs"); fs.cpSync("proto", "dist/proto", { recursive: true, \
      filter: (p) => !p.startsWith("proto/gen") && (p.endsWith(".proto") || fs.statSync(p).isDirectory()) })'

# Production dependencies only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --loglevel=error && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
# The commit built: kas's User-Agent toward GitLab (gitlab-kas/<version>/<commit>) and agentk's
# commit_id reported to GitLab: docker build --build-arg GIT_COMMIT=$(git rev-parse --short HEAD) ...
ARG GIT_COMMIT=unknown
ENV GITLAB_AGENT_COMMIT=${GIT_COMMIT}
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules node_modules
COPY --from=build /src/dist dist
# Not root; numeric, so that Kubernetes' runAsNonRoot can check it.
USER 1000:1000

# Exec form: node is PID 1 and gets SIGTERM itself (both daemons drain on SIGTERM and SIGINT).
FROM runtime AS agentk
EXPOSE 8080
ENTRYPOINT ["node", "dist/cmd/agentk/main.js"]

FROM runtime AS kas
EXPOSE 8150 8151 8153 8154 8155
ENTRYPOINT ["node", "dist/cmd/kas/main.js"]
