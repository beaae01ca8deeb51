# Baton. `make test` is the one test command (DESIGN.md §12): it installs the Node peers when
# Node is present, then vets, runs every test with the race detector, and fuzzes briefly.

GO    ?= go
PEERS := integration/peers

.PHONY: all peers test bench build demo

all: build

# Installs the pinned third-party peers from the committed lockfile, when Node is present and
# the install is missing or older than the lockfile. Without Node the peer tests skip (or fail
# when CI is set).
peers:
	@if command -v node >/dev/null 2>&1; then \
		if [ ! -d $(PEERS)/node_modules ] || [ $(PEERS)/package-lock.json -nt $(PEERS)/node_modules/.package-lock.json ]; then \
			echo "peers: npm ci in $(PEERS)"; \
			cd $(PEERS) && npm ci --no-audit --no-fund; \
		else \
			echo "peers: up to date"; \
		fi; \
	else \
		echo "peers: node not found on PATH; the integration peer tests will skip (and fail when CI is set)"; \
	fi

test: peers
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 40m ./...
	$(GO) test -run XXX -fuzz FuzzDecodeRunAgentInput -fuzztime 10s ./agui/

bench:
	$(GO) test -run XXX -bench . -benchmem ./...

build:
	$(GO) build -o bin/ ./cmd/...

demo:
	$(GO) run ./cmd/coordinator
