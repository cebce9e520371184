# syntax=docker/dockerfile:1

# chatlane image: one image, many roles. The role is the command:
#   docker run chatlane ingress | worker | compactor | all | mock-llm
# `node` is PID 1 (exec-form ENTRYPOINT, no npm, no shell wrapper), so it receives
# SIGTERM from `docker stop` directly and the CLI's shutdown handlers drain work.

# ---- build: compile TypeScript (and copy the Lua scripts) with dev dependencies ----
FROM node:24-bookworm-slim AS build
WORKDIR /app

# Dependencies first so the layer is cached until the lockfile changes. `npm install` with the
# lockfile, not `npm ci`: the lockfile records only the platform packages (biome, rollup,
# msgpackr) of the machine that wrote it, and `npm ci` refuses a lockfile without the others.
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm install --no-audit --no-fund

COPY . .
RUN npm run build \
  && npm prune --omit=dev

# ---- runtime: production dependencies and compiled output only ----
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app

# Owned by root and read-only to the app user: the service never writes its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Example skills, profile and mcp.json (README, "Giving the agent capabilities"; the demo loads them).
COPY --from=build /app/examples ./examples

# Ingress HTTP port (PORT). Workers/compactor serve /healthz /readyz /metrics on METRICS_PORT.
EXPOSE 3000

USER node

ENTRYPOINT ["node", "dist/cli.js"]
CMD ["all"]
