# Browser Bridge. `make build` writes bin/; `make test` runs every test.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/browserbridge/browserbridge/bridge/buildinfo.Version=$(VERSION)
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

.PHONY: build test vet test-tools ext-unit ext-lint ext-format unit bench-once cross test-install bench bench-gateway bench-alternatives fuzz clean

# Static binaries (no cgo), as the Dockerfile builds them: nothing to break
# when libc changes, and a process does not map libc (about 1.1 MiB less
# resident memory for an idle gateway; docs/performance.md).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/browserbridge ./bridge/cmd/browserbridge
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/browserbridge-host ./host
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/browserbridge-proxy ./bridge/cmd/browserbridge-proxy
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/browserbridge-gateway ./bridge/cmd/browserbridge-gateway

test: vet test-tools ext-unit ext-lint unit bench-once cross test-install

# The real MCP clients and stdio servers (npm registry) the Go tests run
# against: installed into tools/npm from its lock file, a no-op once there.
test-tools:
	@./scripts/install-test-tools.sh >/dev/null

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# The extension's unit tests: Node's built-in runner, no npm packages.
ext-unit:
	node --test extension/test/

# The extension's lint, with eslint and prettier from tools/npm: eslint
# (eslint.config.js) and prettier (.prettierrc) over all of it.
# `make ext-format` formats FORMATTED: prettier, then eslint --fix for the
# braces prettier's line breaks call for, then prettier again.
FORMATTED ?= eslint.config.js extension
ESLINT = "$$node" tools/npm/node_modules/.bin/eslint
PRETTIER = "$$node" tools/npm/node_modules/.bin/prettier

ext-lint: test-tools
	@node=$$(./scripts/install-test-tools.sh) && \
	  $(ESLINT) --max-warnings 0 eslint.config.js extension && \
	  $(PRETTIER) --check --log-level warn $(FORMATTED)

ext-format: test-tools
	@node=$$(./scripts/install-test-tools.sh) && \
	  $(PRETTIER) --write --log-level warn $(FORMATTED) && \
	  $(ESLINT) --fix $(FORMATTED) && \
	  $(PRETTIER) --write --log-level warn $(FORMATTED)

# The end-to-end package (real Chromium, real clients) takes 8 to 10 minutes
# under -race on a busy 2-core machine, near go test's default 10-minute limit.
unit:
	$(GO) test -race -count=1 -timeout 20m ./...

# Every Go benchmark once, with the least work (-benchtime 1x), so that one
# that no longer runs fails here rather than when someone wants its figures;
# the figures themselves mean nothing at 1x. Only the packages that have
# benchmarks, without -race (under it the proxy's took ten minutes). The e2e
# package's run too (real Chromium, about a minute): BenchmarkTaskAlternatives
# runs Browser Bridge's rounds alone when its peers (npm, installed by
# scripts/bench-alternatives.sh) are absent. Left out: the capacity benchmarks,
# which hold 10,000 (BenchmarkPairsHeld) or some 3,000 (BenchmarkClusterPairsHeld)
# connection pairs whatever b.N is, a minute or more each; and
# BenchmarkScreenshotFormats, which reads seven pages in eight formats with
# tesseract whatever b.N is (eight minutes here; without tesseract, as on CI, it
# skips anyway).
BENCH_ONCE_SKIP = ^(BenchmarkPairsHeld|BenchmarkClusterPairsHeld|BenchmarkScreenshotFormats)$$
bench-once:
	$(GO) test -count=1 -timeout 15m -run '^$$' -bench . -benchtime 1x -skip '$(BENCH_ONCE_SKIP)' \
	  $$(git grep -l '^func Benchmark' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')

# Every platform we ship must compile, with its build-tagged files.
cross:
	@for p in $(PLATFORMS); do \
	  echo "build $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null ./... || exit 1; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./... || exit 1; \
	done

test-install:
	./scripts/test-install.sh

# Benchmarks: figures for closing notes, never pass/fail.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3000x ./bridge/...

# MCP stdio gateways (browserbridge, supergateway, mcp-proxy) against a direct
# stdio connection, in front of server-everything's echo tool: one table,
# never pass/fail. Flags go in GWBENCH, e.g. GWBENCH='--sessions 1,10 --duration 2s'.
bench-gateway: build test-tools
	$(GO) run ./bridge/cmd/gwbench $(GWBENCH)

# Issue 19's 10-step task against Playwright MCP and chrome-devtools-mcp (npm,
# pinned in the script, installed outside the repository) beside Browser
# Bridge, in interleaved rounds: one table, never pass/fail. BENCHTIME sets
# the rounds (default 5x).
bench-alternatives:
	GO=$(GO) ./scripts/bench-alternatives.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzReadFrame -fuzztime 30s ./bridge/nativemsg
	$(GO) test -run '^$$' -fuzz FuzzReassembler -fuzztime 30s ./bridge/nativemsg
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./bridge/relaywire
	$(GO) test -run '^$$' -fuzz FuzzMapID -fuzztime 30s ./bridge/relaywire
	# -fuzzminimizetime 0x: the proxy's background goroutines make every input
	# look new, and minimizing each would stall the run.
	$(GO) test -run '^$$' -fuzz FuzzRouting -fuzztime 30s -fuzzminimizetime 0x ./bridge/internal/proxy

clean:
	rm -rf bin
