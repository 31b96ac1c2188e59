# A thin front door to CMake (see CMakePresets.json). Quick start: `make demo`, `make test`.
#   make demo      the main job (CUDA build on a machine with nvcc and a GPU, host emulator
#                  otherwise): gpmkit info, a crash-and-resume demonstration, the quick suite
#   make test      host build + every test (what CI runs)
#   make gpu-test  CUDA build + the tests labelled `gpu` (on a GPU machine)
#   make bench     gpmbench on the best backend here, then its report (bench/results/<machine>/)
#   make cuda      CUDA build only (compiles without a GPU)
JOBS ?= $(shell nproc)
HAVE_GPU := $(shell command -v nvcc >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU && echo 1)
ifeq ($(HAVE_GPU),1)
BEST := cuda
else
BEST := host
endif

.PHONY: demo test gpu-test bench deps host cuda clean

deps:
	@scripts/install-deps.sh

host: deps
	cmake --preset host
	cmake --build --preset host -j $(JOBS)

cuda:
	cmake --preset cuda
	cmake --build --preset cuda -j $(JOBS)

test: host
	ctest --preset host -j $(JOBS)

gpu-test: cuda
	ctest --preset cuda

DEMO_OUT ?= build/$(BEST)/demo-results

demo: $(BEST)
	build/$(BEST)/tools/gpmkit/gpmkit info
	build/$(BEST)/bench/gpmbench crash-demo
	build/$(BEST)/bench/gpmbench suite --quick --out $(DEMO_OUT)
	@echo "The quick suite's report: $(DEMO_OUT)/report.md"

ifeq ($(BEST),cuda)
BENCH_TAG ?= $(shell nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]+' | head -1 | tr A-Z a-z)
else
BENCH_TAG ?= host-emulator
endif
BENCH_OUT ?= bench/results/$(BENCH_TAG)

bench: $(BEST)
	build/$(BEST)/bench/gpmbench run platform --out $(BENCH_OUT)
	build/$(BEST)/bench/gpmbench report $(BENCH_OUT)

clean:
	rm -rf build
