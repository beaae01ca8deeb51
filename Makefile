# Baton. `make test` is the one test command (DESIGN.md §12): it installs the Node peers when
# Node is present, then vets, runs every test with the race detector, and fuzzes briefly.

GO    ?= go
PEERS := integration/peers

# -trimpath keeps the checkout's directory out of the build: the build cache (and vet's and
# staticcheck's) then serves a fresh clone in another directory too, instead of compiling
# and analysing this module's packages again.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

.PHONY: all peers browser postgres proxies lint test bench build demo compose-smoke

all: build

# Installs the pinned third-party peers from the committed lockfile, when Node is present. A
# fresh checkout links integration/peers/node_modules to an install kept under PEERS_CACHE by
# the lockfile's hash (made with `npm ci` the first time), so that a new clone does not unpack
# the same tree again; a node_modules directory of its own (an older checkout) is kept and
# reinstalled in place when older than the lockfile. Without Node the peer tests skip (or fail
# when CI is set).
PEERS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/baton/peers

peers:
	@if ! command -v node >/dev/null 2>&1; then \
		echo "peers: node not found on PATH; the integration peer tests will skip (and fail when CI is set)"; \
	elif [ -d $(PEERS)/node_modules ] && [ ! -L $(PEERS)/node_modules ]; then \
		if [ $(PEERS)/package-lock.json -nt $(PEERS)/node_modules/.package-lock.json ]; then \
			echo "peers: npm ci in $(PEERS)"; \
			cd $(PEERS) && npm ci --no-audit --no-fund; \
		else \
			echo "peers: up to date"; \
		fi; \
	else \
		key=$$(sha256sum $(PEERS)/package-lock.json | cut -c1-16); dir="$(PEERS_CACHE)/$$key"; \
		if [ ! -f "$$dir/installed" ]; then \
			echo "peers: npm ci in $$dir"; \
			tmp="$$dir.tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
			cp $(PEERS)/package.json $(PEERS)/package-lock.json "$$tmp"/; \
			(cd "$$tmp" && npm ci --no-audit --no-fund) || { rm -rf "$$tmp"; exit 1; }; \
			touch "$$tmp/installed"; rm -rf "$$dir"; mv "$$tmp" "$$dir"; \
		else \
			echo "peers: installed in $$dir"; \
		fi; \
		ln -sfn "$$dir/node_modules" $(PEERS)/node_modules; \
	fi

# Installs Debian's chromium for the browser tests (web/, integration/TestBrowser) when no
# browser is found and this is a root shell with apt-get (CI containers). Otherwise it only
# reports: the browser tests skip without a browser, and fail when CI is set.
browser:
	@if [ -n "$$BATON_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		echo "browser: found"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing Debian's chromium"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
			|| echo "browser: installing chromium failed; the browser tests will skip (and fail when CI is set)"; \
	else \
		echo "browser: chromium not found (install it, or set BATON_CHROMIUM); the browser tests will skip (and fail when CI is set)"; \
	fi

# Installs Debian's postgresql server binaries for the PostgreSQL store tests when none are
# found and this is a root shell with apt-get (CI containers). The tests start a throwaway
# server from them (internal/testutil/pgtest), or use BATON_TEST_POSTGRES_URL when it is set;
# without either they skip locally and fail when CI is set.
postgres:
	@if [ -n "$$BATON_TEST_POSTGRES_URL" ]; then \
		echo "postgres: using BATON_TEST_POSTGRES_URL"; \
	elif [ -n "$$PG_BINDIR" ] || { command -v pg_config >/dev/null 2>&1 && [ -x "$$(pg_config --bindir)/initdb" ]; } || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "postgres: found"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "postgres: installing Debian's postgresql"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; } \
			|| echo "postgres: installing postgresql failed; the PostgreSQL tests will skip (and fail when CI is set)"; \
	else \
		echo "postgres: PostgreSQL binaries not found (install postgresql, or set BATON_TEST_POSTGRES_URL); the PostgreSQL tests will skip (and fail when CI is set)"; \
	fi

# Installs Debian's nginx, haproxy and caddy for the proxy tests (integration/TestBehindProxies
# runs the configs of deploy/proxies) when one is missing and this is a root shell with
# apt-get (CI containers). Only the binaries are used: the packages' own services are not
# started by the tests. Otherwise it only reports: the proxy tests skip a missing proxy, and
# fail when CI is set.
proxies:
	@missing=""; for p in nginx haproxy caddy; do \
		command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
		echo "proxies: found"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "proxies: installing Debian's$$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; } \
			|| echo "proxies: installing$$missing failed; their proxy tests will skip (and fail when CI is set)"; \
	else \
		echo "proxies:$$missing not found (install Debian's packages); their proxy tests will skip (and fail when CI is set)"; \
	fi

# gofmt, go vet and staticcheck (pinned in go.mod as a tool): all three must be clean.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './integration/peers/*')); \
	if [ -n "$$unformatted" ]; then echo "lint: not gofmt'd (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# go test starts packages in the order they are named: ./integration/ first, the longest
# package by far (about six minutes; listed in its place, it waited two minutes for its
# turn), then the other long ones, longest first, beside it (FIRST), so that the short
# packages are what is left when the integration suite ends. Alphabetically, mcpclient and
# server (about a minute each under load, mostly waiting) came last and kept the machine half
# idle for the last 50 s. -vet=off: lint has just run all of go vet, of which go test's own
# checks are a part. -ldflags=-w: the test binaries are linked without DWARF (a sixth of each
# link; stack traces and race reports do not use it).
#
# Beside it, at low priority (nice), so that they take what the race-detector run leaves idle
# (about a sixth of the two cores) rather than 15 s after it: the tests that move tens of MiB
# through JSON, too slow under the race detector (their files say //go:build !race), and a
# short fuzz run. Fuzz budgets are counts, not durations: with a -fuzztime duration, Go 1.26's
# fuzz coordinator can report its own stop deadline as a failure ("context deadline
# exceeded", no crasher) when a loaded machine starves a worker (go.dev/issue/75804, fixed in
# 1.27). Their output is shown at the end.
FIRST := ./integration/ ./mcpclient/ ./store/ ./server/ ./coordinator/ ./web/ ./a2a/ \
	./internal/testutil/pgtest/ ./cmd/coordinator/
BESIDE := $(GO) test -count=1 -run 'TestConversationStoredOnce' ./coordinator/ && \
	$(GO) test -run XXX -fuzz FuzzEscapeUntrusted -fuzztime 20000x ./bridge/ && \
	$(GO) test -run XXX -fuzz FuzzDecodeRunAgentInput -fuzztime 20000x ./agui/
test: peers browser postgres proxies lint
	@beside=$$(mktemp); \
	echo "nice sh -c \"$(BESIDE)\" (in the background)"; \
	nice -n 15 sh -c "$(BESIDE)" > $$beside 2>&1 & pid=$$!; \
	echo "$(GO) test -race -count=1 -timeout 40m -vet=off -ldflags=-w $(FIRST) ./..."; \
	$(GO) test -race -count=1 -timeout 40m -vet=off -ldflags=-w $(FIRST) ./...; rc=$$?; \
	wait $$pid || rc=1; \
	echo "--- beside, at low priority: $(BESIDE)"; cat $$beside; rm -f $$beside; \
	exit $$rc

bench:
	$(GO) test -run XXX -bench . -benchmem ./...

# VERSION is stamped into the binaries (coordinator --version): the nearest tag and the commit
# (`git describe`), "dev" outside a git checkout; override with `make build VERSION=v1.2.3`.
# -buildvcs=auto also records the VCS revision in the build info even where GOFLAGS turns
# stamping off. -trimpath and -s -w leave out local paths and debug info (about a sixth of
# the size: the binaries are for running; debug with `go build` or `go run`).
VERSION ?= $(shell git describe --tags --always --dirty --abbrev=12 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

build:
	$(GO) build -trimpath -buildvcs=auto -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

demo:
	$(GO) run ./cmd/coordinator

# Builds the images, brings the compose stack up, runs TestBrowser against it and takes it
# down, where a Docker engine runs. Not part of `make test`.
compose-smoke:
	GO="$(GO)" ./deploy/compose-smoke.sh
