# Baton. `make test` is the one test command (DESIGN.md §12): it installs the Node peers when
# Node is present, then vets, runs every test with the race detector, and fuzzes briefly.

GO    ?= go
PEERS := integration/peers

# -trimpath keeps the checkout's directory out of the build: the build cache (and vet's and
# staticcheck's) then serves a fresh clone in another directory too, instead of compiling
# and analysing this module's packages again.
# One build configuration for everything but the race detector: `make demo`, `make build`,
# `make lint` (go vet compiles too) and the tests that run without -race all compile the
# same packages with the same flags, so the build cache compiles each once; -race is the
# second and last configuration. (-ldflags and -buildvcs only change the link.)
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

# bash for pipefail: the build's output goes through a filter (PROGRESS) and its exit status
# must still be go's.
SHELL := bash
.SHELLFLAGS := -o pipefail -c

# PROGRESS numbers the package paths that `go build -v` prints as it compiles them (those the
# build cache holds are not printed) against $$n, the count of packages in the build, and
# passes everything else (compiler errors) through. A first build is minutes of compiling on
# a small machine; this is what shows it moving.
PROGRESS = awk -v n="$$n" -v w="$(1)" '/^[^ :]+$$/ { k++; printf "%s: compiled %d of %d: %s\n", w, k, n, $$0; fflush(); next } { print; fflush() }'
# ELAPSED prints how long the recipe took since start=$$(date +%s).
ELAPSED = echo "$(1): done in $$(( $$(date +%s) - start ))s"

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

# The browser, postgres and proxies targets find the tools that some tests need. Outside CI
# they change nothing, even in a root shell: they say what was found, and what is missing
# with the tests that will skip for it (those tests print the same reason, and fail when CI
# is set). Under CI (the CI variable set, as CI services set CI=true) they install what is
# missing with Debian's apt-get through scripts/ci-apt-install.sh, which says what and why,
# starts no service, enables none at boot, and upgrades nothing unrelated.
APT_CI := sh scripts/ci-apt-install.sh

# Chromium, for the headless browser tests (web/, integration TestBrowser*).
browser:
	@if [ -n "$$BATON_CHROMIUM" ]; then \
		echo "browser: BATON_CHROMIUM=$$BATON_CHROMIUM"; \
	elif p=$$(command -v chromium || command -v chromium-browser || command -v google-chrome); then \
		echo "browser: found $$p"; \
	elif [ -n "$$CI" ]; then \
		$(APT_CI) browser "the browser tests (web/, integration TestBrowser*)" chromium; \
	else \
		echo "browser: chromium not found: the browser tests (web/, integration TestBrowser*) will skip. Install chromium or set BATON_CHROMIUM to a Chrome/Chromium binary (CI=true installs Debian's)"; \
	fi

# PostgreSQL's server binaries (initdb, postgres), for the PostgreSQL store tests: they start
# a throwaway server of their own (internal/testutil/pgtest), or use BATON_TEST_POSTGRES_URL.
postgres:
	@if [ -n "$$BATON_TEST_POSTGRES_URL" ]; then \
		echo "postgres: using BATON_TEST_POSTGRES_URL"; \
	elif [ -n "$$PG_BINDIR" ]; then \
		echo "postgres: PG_BINDIR=$$PG_BINDIR"; \
	elif p=$$({ command -v pg_config >/dev/null 2>&1 && ls "$$(pg_config --bindir)/initdb"; } 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -n 1); then \
		echo "postgres: found $$p"; \
	elif [ -n "$$CI" ]; then \
		$(APT_CI) postgres "the PostgreSQL store tests" postgresql; \
	else \
		echo "postgres: PostgreSQL's initdb not found: the PostgreSQL store tests will skip. Install PostgreSQL 15 (Debian's postgresql), set PG_BINDIR, or set BATON_TEST_POSTGRES_URL (CI=true installs Debian's)"; \
	fi

# nginx, HAProxy and Caddy, for integration/TestBehindProxies (it runs deploy/proxies' configs
# with the binaries; the packages' services are never used).
proxies:
	@missing=""; found=""; for p in nginx haproxy caddy; do \
		if b=$$(command -v $$p) || { b=/usr/sbin/$$p; [ -x $$b ]; }; then found="$$found $$b"; else missing="$$missing $$p"; fi; \
	done; \
	[ -z "$$found" ] || echo "proxies: found$$found"; \
	if [ -z "$$missing" ]; then :; \
	elif [ -n "$$CI" ]; then \
		$(APT_CI) proxies "integration TestBehindProxies" $$missing; \
	else \
		echo "proxies:$$missing not found: their TestBehindProxies subtests will skip. Install them (Debian's packages of the same names; CI=true installs them)"; \
	fi

# gofmt, go vet and staticcheck (pinned in go.mod as a tool): all three must be clean.
lint:
	@start=$$(date +%s); unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './integration/peers/*')); \
	if [ -n "$$unformatted" ]; then echo "lint: not gofmt'd (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	@start=$$(date +%s); n=$$($(GO) list -deps ./... | wc -l); \
	echo "lint: go vet ./... ($$n packages: compiled first where the build cache lacks them, the same build as make build's)"; \
	$(GO) build -v ./... 2>&1 | $(call PROGRESS,lint); \
	$(GO) vet ./... && echo "lint: go tool staticcheck ./..." && $(GO) tool staticcheck ./... && $(call ELAPSED,lint)

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
FIRST := ./integration/ ./mcpclient/ ./store/ ./server/ ./coordinator/ ./web/ ./subagent/ \
	./internal/testutil/pgtest/ ./cmd/coordinator/
BESIDE := $(GO) test -count=1 -run 'TestConversationStoredOnce' ./coordinator/ && \
	$(GO) test -run XXX -fuzz FuzzEscapeUntrusted -fuzztime 20000x ./bridge/ && \
	$(GO) test -run XXX -fuzz FuzzDecodeRunAgentInput -fuzztime 20000x ./agui/
#
# Before the tests, the packages they need are compiled with -race in one go build -v, so that
# the first minutes (up to ten on a small machine with a cold cache) show their progress;
# go test then finds them in the cache.
# CHECK_TOOLS runs the tool checks again, for the summary at the end. It is expanded once, here,
# so that the recipe names no $(MAKE): make -n would run such a line, and with it the tests.
CHECK_TOOLS := $(MAKE) --no-print-directory -s peers browser postgres proxies
test: peers browser postgres proxies lint
	@start=$$(date +%s); pkgs=$$($(GO) list -deps -test -f '{{if or .GoFiles .CgoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e ' ' -e '\.test$$' | sort -u); n=$$(echo "$$pkgs" | wc -l); \
	echo "test: compiling with -race the $$n packages the tests use (the build cache keeps them: a second run starts at once)"; \
	$(GO) build -race -v $$pkgs 2>&1 | $(call PROGRESS,test) || exit 1; \
	echo "test: compiled in $$(( $$(date +%s) - start ))s"; \
	beside=$$(mktemp); \
	echo "nice sh -c \"$(BESIDE)\" (in the background)"; \
	nice -n 15 sh -c "$(BESIDE)" > $$beside 2>&1 & pid=$$!; \
	echo "$(GO) test -race -count=1 -timeout 40m -vet=off -ldflags=-w $(FIRST) ./..."; \
	$(GO) test -race -count=1 -timeout 40m -vet=off -ldflags=-w $(FIRST) ./...; rc=$$?; \
	wait $$pid || rc=1; \
	echo "--- beside, at low priority: $(BESIDE)"; cat $$beside; rm -f $$beside; \
	skips=$$($(CHECK_TOOLS) 2>&1 | grep 'skip'); \
	if [ -n "$$skips" ]; then echo "test: some tests skipped for want of a tool (go test -v shows each one's reason):"; echo "$$skips"; fi; \
	$(call ELAPSED,test); exit $$rc

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
	@start=$$(date +%s); n=$$($(GO) list -deps ./cmd/... | wc -l); \
	echo "build: bin/ from ./cmd/... ($$n packages; a first build compiles them all: several minutes on 2 cores, then seconds)"; \
	$(GO) build -v -buildvcs=auto -ldflags "$(LDFLAGS)" -o bin/ ./cmd/... 2>&1 | $(call PROGRESS,build) && \
	$(call ELAPSED,build) && ls bin/

# The demo: bin/coordinator on its embedded demo stack (the same as `go run ./cmd/coordinator`,
# with the build's progress shown and its compile shared with make build and the tests).
# Flags go in ARGS: make demo ARGS="--log-level debug"; the address in BATON_LISTEN:
# BATON_LISTEN=127.0.0.1:9090 make demo.
demo: build
	./bin/coordinator $(ARGS)

# Builds the images, brings the compose stack up, runs TestBrowser against it and takes it
# down, where a Docker engine runs. Not part of `make test`.
compose-smoke:
	GO="$(GO)" ./deploy/compose-smoke.sh
