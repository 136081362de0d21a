# The service image: the API by default; docker-compose.yml also runs the worker and `npm run migrate`
# from it. TypeScript runs through tsx (a runtime dependency), so no build step. The services run
# node directly (exec form, no shell or npm in between), so SIGTERM reaches node and the container
# lives until node has drained and exited; run with an init (`init: true`, `docker run --init`) so
# that it is not PID 1.
# The Node version is .nvmrc's (test/unit/runtime-pin.test.ts holds them equal).
FROM node:24.22.3-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY . .
# The official image's `node` user, by number (uid:gid 1000) so that Kubernetes' runAsNonRoot can
# verify it is not root; the code and node_modules stay root's, read-only to the service.
USER 1000:1000
EXPOSE 3000
STOPSIGNAL SIGTERM
# --no-memory-reducer: scripts/processes.ts (SERVICE_NODE_FLAGS) says why.
CMD ["node", "--no-memory-reducer", "--import", "tsx", "src/main/api.ts"]
