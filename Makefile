# QAS build, test and benchmark entry points. See README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin
PKGS := ./...
# Tools and servers the tests need are built or installed once into $(QAS_CACHE),
# keyed by version, outside the repository.
export QAS_CACHE ?= $(HOME)/.cache/qas
WITH_INFRA := bash test/infra/env.sh

.PHONY: all build test unit bench lint fmt vet golangci demo evaluate evaluate-held-out proxy-demo fuzz generate clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $$($(GO) list ./.../cmd/...)

## test: lint, then unit and integration tests against real servers (installs what they need).
test: lint
	$(WITH_INFRA) $(GO) test -count=1 -timeout 20m $(PKGS)

## unit: the tests that need no external server (integration tests skip themselves).
unit:
	$(GO) test -count=1 $(PKGS)

## bench: Go benchmarks, then the load-generator benchmarks that compare against baselines.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@for b in test/bench/*.sh; do [ -f "$$b" ] && { echo "== $$b"; bash "$$b" || exit 1; }; done; true

## lint: gofmt, go vet, then golangci-lint (.golangci.yml: layering, aliases, errors, staticcheck).
lint: fmt vet golangci

golangci:
	bash hack/lint.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each.
FUZZTIME ?= 10s
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; done; done

## demo: the main job on a built-in default: a one-minute taste of `make evaluate`.
demo: build
	bash examples/demo.sh

## evaluate: the whole evaluation matrix in real time on every core (10–12 minutes on 2 shared cores):
## out/evaluate/results.md, results.json and report.html.
QAS_SHARED ?= $(abspath ../shared)
evaluate: build
	$(BIN)/qas-decider evaluate --nasa $(QAS_SHARED)/traces/nasa-1995-07-08.rps.gz --out out/evaluate

## evaluate-held-out: the held-out shapes, never tuned on (24 six-hour cells, about 10 minutes on 2 cores):
## out/evaluate-held-out/results.md, results.json and report.html.
evaluate-held-out: build
	$(BIN)/qas-decider evaluate --held-out --out out/evaluate-held-out

## generate: deepcopy code and the QueueAutoscaler CRD (controller-gen).
generate:
	bash hack/generate.sh

## proxy-demo: the example app behind qas-proxy under a short generated load.
proxy-demo: build
	bash examples/proxy-demo.sh

clean:
	rm -rf $(BIN)
