# Baton: one image with the coordinator and the demo peers (demo-agent, demo-mcp).
#
#   docker build -t baton --build-arg VERSION=$(git describe --always --dirty) .
#   docker run --rm -p 8080:8080 -v ./deploy/baton.yaml:/etc/baton/baton.yaml:ro baton
#
# What must be present: the build stage's image (golang:1.26-bookworm, pulled once or
# already local) and the Go module proxy (or a warm module cache) for `go mod download`.
# The runtime stage is `scratch`, so nothing else is pulled: no registry-only syntax
# directive, no distroless base.
#
# Build stage: static binaries (the SQLite store is pure Go, so CGO is off).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# .git is not in the build context (.dockerignore): the version comes from VERSION.
RUN mkdir -p /out/bin /out/data \
 && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/bin/ ./cmd/coordinator ./cmd/demo-agent ./cmd/demo-mcp

# Runtime stage: the static binaries and the CA certificates (for https model providers,
# agents and MCP servers), nothing else: no shell, no package manager, a non-root user.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/bin/ /usr/local/bin/
# The store's directory, owned by the runtime user so that a named volume mounted here
# inherits a writable owner.
COPY --from=build --chown=65532:65532 /out/data /data
ENV PATH=/usr/local/bin
USER 65532:65532
WORKDIR /data
EXPOSE 8080
# The coordinator with no config starts the embedded demo stack on loopback, which is of
# no use from outside the container: pass --config (see docker-compose.yml).
CMD ["coordinator", "--config", "/etc/baton/baton.yaml"]
