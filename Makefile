# ax — make targets. Run `make` (or `make help`) for the list.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Every module of the repository; each is tested, linted and tidied on its own.
MODULES := $(shell for m in . mysqlstore axotel console/browsertest cmd/axbench cmd/axctl; do [ -f $$m/go.mod ] && echo $$m; done)

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOLANGCI    := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
FUZZTIME    ?= 5s
DEMO_FLAGS  ?=

.PHONY: help
help: ## Show this help.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2}'

.PHONY: db
db: ## Make sure a MariaDB/MySQL answers on 127.0.0.1:3306 (starts or installs one).
	@bash scripts/ensure-mariadb.sh

.PHONY: browser
browser: ## Make sure Chromium is installed for the console's browser tests (installs Debian's chromium).
	@bash scripts/ensure-chromium.sh

.PHONY: test
test: db browser ## Run every module's tests with the race detector (needs MariaDB and Chromium; `make db browser` gets them).
	@set -e; for m in $(MODULES); do echo "== go test $$m"; (cd $$m && go test -race -count=1 ./...); done

.PHONY: cover
cover: db browser ## Run the tests with coverage; writes cover.out per module.
	@set -e; for m in $(MODULES); do (cd $$m && go test -race -count=1 -covermode=atomic -coverprofile=cover.out ./... && go tool cover -func=cover.out | tail -1); done

.PHONY: bench
bench: db ## Run the go benchmarks of the core module and every axbench scenario (durable needs MariaDB; `make db` starts one).
	go test -run '^$$' -bench . -benchmem ./queue/ ./timewheel/ ./kernel/
	@if [ -f cmd/axbench/go.mod ]; then cd cmd/axbench && go run . -scenario all -json ../../bench/results/latest.json -html ../../bench/results/latest.html; fi

.PHONY: fuzz
fuzz: ## Run every fuzz target for $(FUZZTIME) (FUZZTIME=30s make fuzz for longer).
	@set -e; for t in $$(go test -list '^Fuzz' ./fuzz/ | grep '^Fuzz'); do echo "== $$t"; go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./fuzz/; done

.PHONY: lint
lint: ## go vet, staticcheck and golangci-lint on every module.
	@set -e; for m in $(MODULES); do echo "== lint $$m"; (cd $$m && go vet ./... && go run $(STATICCHECK) ./... && go run $(GOLANGCI) run ./...); done

.PHONY: tidy-check
tidy-check: ## Fail when go mod tidy would change a go.mod or go.sum, or the workspace would change go.work.sum.
	@# Each module on its own, its requires of ax and mysqlstore resolved from the working tree
	@# through a local module proxy; go.sum keeps no line for them (scripts/modcheck.sh says why).
	@bash scripts/modcheck.sh tidy $(MODULES)
	@# Loading the workspace's module graph (as go doc, go list and the IDE do) writes the
	@# checksums it lacks into go.work.sum and drops those it no longer needs.
	@go list -m all >/dev/null && git diff --exit-code go.work.sum

.PHONY: consumer-check
consumer-check: ## Build and vet mysqlstore, axotel, cmd/axbench and cmd/axctl as their users do: GOWORK=off, requires resolved from the working tree served as a release.
	@bash scripts/modcheck.sh consumer $(filter-out .,$(MODULES))

.PHONY: demo
demo: ## ax beside plain pools in about 10 s: High work in a Low flood; a slow, failing upstream (DEMO_FLAGS="-seed 2").
	@go run ./examples/demo $(DEMO_FLAGS)
