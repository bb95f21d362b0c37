# The README's test command is `make test`: formatting, vet, the race-enabled
# unit and end-to-end tests, and a short run of every fuzz target.
GO ?= go
# Pebble (fsm/store) compresses with its Go zstd, as the static build
# (CGO_ENABLED=0) does: the race-enabled tests run the code that ships,
# and no C is compiled for them.
export GOFLAGS += -tags=pebblegozstd
# FUZZTIME is a count of inputs, not a duration: with a duration, go1.26's
# fuzzing coordinator can fail a clean run with "context deadline exceeded"
# when its clock runs out while a worker is mid-input (golang/go#75804,
# fixed in go1.27). A count has no deadline to race. A new interesting input
# is minimized for at most FUZZMINIMIZE.
FUZZTIME ?= 100000x
FUZZMINIMIZE ?= 5s

# package:target for every fuzz target.
FUZZ_TARGETS = \
	./fsm:FuzzDecodeCommand \
	./fsm:FuzzReadSnapshot \
	./fsm:FuzzParseKey \
	./fsm:FuzzPlainlyCanonical \
	./fsm:FuzzPositions \
	./fsm/store:FuzzDecodeStream \
	./httpd:FuzzCredential \
	./httpd:FuzzSignatureHeader \
	./httpd:FuzzAcceptLanguage \
	./httpd:FuzzLinkBody \
	./fsm/codes:FuzzCanonicalize \
	./fsm/codes:FuzzCounterCode \
	./fsm/input:FuzzTarget \
	./fsm/input:FuzzToken \
	./httpd/geo:FuzzCountry \
	./httpd/geo/internal/geofile:FuzzParse \
	./httpd/agent:FuzzClassify

.PHONY: test deps clients check unit unit-without-s3 unit-s3 k8s fuzz build bench image weed mutate

# SeaweedFS's weed builds while the tests that need no S3 server run (the
# build is some minutes of a fresh machine's two cores, the tests leave
# cores idle while nodes elect and wait); the S3 tests run once it is
# there.
test: deps clients check
	@$(MAKE) --no-print-directory -j2 unit-without-s3 weed
	@$(MAKE) --no-print-directory unit-s3 k8s fuzz

# weed is SeaweedFS's server, the real S3-compatible server the backup
# tests write to (no mock). Its module cannot be go-installed (its go.mod
# has a replace directive), so it is downloaded at a pinned version and
# built from a writable copy into .tools/weed (about 7-10 minutes on two
# cores, once per machine); the tests find it through LINKRAFT_WEED.
WEED_VERSION = v0.0.0-20261109003541-7506e5f91cd6
WEED = $(CURDIR)/.tools/weed
export LINKRAFT_WEED = $(WEED)
weed: $(WEED)
$(WEED):
	@set -e; mkdir -p .tools; \
	dir=$$($(GO) mod download -json github.com/seaweedfs/seaweedfs@$(WEED_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir"; rm -rf .tools/seaweedfs-src; cp -r "$$dir" .tools/seaweedfs-src; chmod -R u+w .tools/seaweedfs-src; \
	echo "building SeaweedFS's weed $(WEED_VERSION) into $(WEED)"; \
	cd .tools/seaweedfs-src && GOFLAGS=-buildvcs=false $(GO) build -o $(WEED).tmp ./weed && mv $(WEED).tmp $(WEED)

# deps installs what the tests drive besides Go: Debian's chromium for the
# browser test, podman and runc for the image test, pebble (Let's
# Encrypt's ACME test CA, with its DNS server) for the HTTPS test, haproxy
# for the deploy doc's HAProxy test (e2e/deploydoc_haproxy_test.go), systemd's
# systemd-analyze for the unit files' hardening test and promtool for the
# metrics test (as root, with apt-get), or says how to get them. promtool is
# taken alone out of Debian's prometheus package: installing the package
# would add a Prometheus server, its user and a service started at boot.
deps:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; \
		else echo "the browser test needs Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }
	@{ command -v podman >/dev/null && command -v runc >/dev/null; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends podman runc; \
		else echo "the image test needs Debian's podman and runc: sudo apt-get install podman runc"; exit 1; fi; }
	@{ command -v pebble >/dev/null && command -v pebble-challtestsrv >/dev/null; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends pebble; \
		else echo "the HTTPS test needs Debian's pebble (an ACME test CA): sudo apt-get install pebble"; exit 1; fi; }
	@{ command -v haproxy >/dev/null || test -x /usr/sbin/haproxy; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; \
		else echo "the deploy doc's HAProxy test needs Debian's haproxy: sudo apt-get install haproxy"; exit 1; fi; }
	@command -v systemd-analyze >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd; \
		else echo "the unit files' test needs systemd-analyze: sudo apt-get install systemd"; exit 1; fi; }
	@command -v promtool >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; apt-get update -qq; \
			(cd "$$d" && apt-get download -qq -o APT::Sandbox::User=root prometheus); \
			dpkg-deb --fsys-tarfile "$$d"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$$d/promtool"; \
			install -m 0755 "$$d/promtool" /usr/local/bin/promtool; \
		else echo "the metrics test needs promtool: sudo apt-get install prometheus (or put its promtool on PATH)"; exit 1; fi; }

# clients installs the client libraries the compatibility tests drive
# (e2e/compat_test.go, e2e/compat_bitly_test.go: Shlink's SDK, Kutt's and
# Bitly's clients from npm), at the
# versions e2e/clients/package-lock.json pins, with Debian's node and npm.
clients:
	@{ command -v node >/dev/null && command -v npm >/dev/null; } || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm; \
		else echo "the compatibility test needs Debian's nodejs and npm: sudo apt-get install nodejs npm"; exit 1; fi; }
	cd e2e/clients && npm ci --no-audit --no-fund

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The tests that count allocations skip themselves under -race, which
# allocates on its own: they run once more without it.
unit: unit-without-s3 unit-s3
# The tests against the real S3 server have S3 in their names
# (cluster/backups/s3test says so).
S3_TESTS = S3
unit-without-s3:
	$(GO) test -race -count=1 -timeout 15m -skip '$(S3_TESTS)' ./...
	$(GO) test -count=1 -run 'AllocatesNothing' ./httpd/
unit-s3: weed
	$(GO) test -race -count=1 -timeout 10m -run '$(S3_TESTS)' ./cluster/backups/ ./e2e/

# k8s decodes the Kubernetes manifests strictly into the API types. It is a
# module of its own (deploy/kubernetes/go.mod), so that k8s.io stays out of
# linkraft's go.mod; "go vet ./..." above does not reach into it.
k8s:
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) $$pkg; \
	done

# mutate writes each bug that e2e/mutate/mutations.go lists, one at a
# time, into a copy of the module and runs the tests said to guard that
# guarantee: each must fail. Run it before resolving an issue that touches
# a guarantee; docs/RELIABILITY.md has the latest table.
mutate:
	$(GO) run ./e2e/mutate

VERSION = $$(git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o linkraft ./cmd/linkraft

# image builds the container image from the Dockerfile. The binary is built
# here, not in the Dockerfile, which cannot reach the network for a golang
# image or modules (its header says more); the build context is a fresh
# directory holding only the binary and an empty data/ for /data.
CONTAINER ?= podman
IMAGE ?= linkraft
image:
	@set -e; ctx=$$(mktemp -d); trap 'rm -rf "$$ctx"' EXIT; mkdir "$$ctx/data"; \
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o "$$ctx/linkraft" ./cmd/linkraft; \
	$(CONTAINER) build $(if $(findstring podman,$(CONTAINER)),--format docker) -f Dockerfile -t $(IMAGE):$(VERSION) -t $(IMAGE):latest "$$ctx"

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./fsm/... ./httpd/...
