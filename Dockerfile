# The service image: `npm run api` by default; docker-compose.yml also runs `npm run worker` and
# `npm run migrate` from it. TypeScript runs through tsx (a runtime dependency), so no build step.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY . .
USER node
EXPOSE 3000
CMD ["npm", "run", "api"]
