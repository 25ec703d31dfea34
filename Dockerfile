# syntax=docker/dockerfile:1
#
# The stdio-MCP-server gateway in a container: browserbridge-gateway (the
# gateway's own binary: `browserbridge gateway` without the bridge linked
# in, so that it idles in less memory) runs the servers of
# /config/servers.json ({"mcpServers": {...}}, Claude Desktop's format)
# and serves them over HTTP on port 3456. Listening on
# 0.0.0.0, the gateway requires a bearer token: set BROWSERBRIDGE_TOKEN
# (compose.yaml reads it from gateway.env).
#
#   docker build -t browserbridge-gateway .
#   docker run --init --read-only --tmpfs /tmp --tmpfs /home/node/.npm:uid=1000,gid=1000 \
#     --cap-drop ALL --security-opt no-new-privileges --env-file gateway.env \
#     -v "$PWD/servers.json:/config/servers.json:ro" -p 127.0.0.1:3456:3456 browserbridge-gateway
#
# Public, for claude.ai and phones (docs/gateway.md, "Public, with OAuth"):
# append `--public-url https://mcp.example.com` (and `--config
# /config/bridge.json` for the password hash or OIDC) to the command, drop
# BROWSERBRIDGE_TOKEN, and put a TLS proxy in front (deploy/). The OAuth
# state lives in /data/oauth.db: mount a volume there (-v oauth-state:/data)
# so that restarts keep every sign-in. The password hash:
#
#   docker run --rm -i --entrypoint browserbridge-gateway browserbridge-gateway hash-password
#
# The images are pinned by version tag; pin them by digest too
# (--build-arg GO_IMAGE=golang:1.26.8-bookworm@sha256:...) where you build
# with network access. The runtime is Node because most stdio servers are
# npm packages run with npx (fetched on first use into ~/.npm, a tmpfs).

ARG GO_IMAGE=golang:1.26.8-bookworm
ARG NODE_IMAGE=node:22-bookworm-slim

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags "-s -w -X github.com/browserbridge/browserbridge/bridge/buildinfo.Version=${VERSION}" \
      -o /out/browserbridge-gateway ./bridge/cmd/browserbridge-gateway

FROM ${NODE_IMAGE}
# The gateway alone: nothing in the image runs the bridge's browserbridge.
COPY --from=build /out/browserbridge-gateway /usr/local/bin/browserbridge-gateway
# Logs under /tmp (a tmpfs with a read-only root); the OAuth state of a
# public gateway on the /data volume; npm quiet.
ENV BROWSERBRIDGE_HOME=/tmp/browserbridge \
    BROWSERBRIDGE_OAUTH_STATE_FILE=/data/oauth.db \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false
# /data belongs to the image's user, so a named volume mounted there
# starts out writable by it.
RUN mkdir /data && chown node:node /data && chmod 0700 /data
VOLUME ["/data"]
# The image's unprivileged user (uid 1000); ~/.npm is npx's cache.
USER node
WORKDIR /home/node
EXPOSE 3456
# Node 22 has fetch, so no curl is needed. /health needs no token (nor a
# sign-in on a public gateway).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:3456/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Run with an init (docker run --init, compose init: true) so that orphaned
# grandchildren of the servers are reaped.
ENTRYPOINT ["browserbridge-gateway", "--servers", "/config/servers.json", "--listen", "0.0.0.0:3456"]
