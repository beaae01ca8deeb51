# syntax=docker/dockerfile:1
#
# Baton: one image with the coordinator and the demo peers (demo-agent, demo-mcp).
#
#   docker build -t baton --build-arg VERSION=$(git describe --always) .
#   docker run --rm -p 8080:8080 baton coordinator --config /etc/baton/baton.yaml
#
# Build stage: static binaries (the SQLite store is pure Go, so CGO is off).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    mkdir -p /out/bin /out/data \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/bin/ ./cmd/coordinator ./cmd/demo-agent ./cmd/demo-mcp

# Runtime stage: no shell, no package manager, a non-root user (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/ /usr/local/bin/
# The store's directory, owned by the runtime user so that a named volume mounted here
# inherits a writable owner.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
EXPOSE 8080
# The coordinator with no config starts the embedded demo stack on loopback, which is of
# no use from outside the container: pass --config (see docker-compose.yml).
CMD ["coordinator", "--config", "/etc/baton/baton.yaml"]
