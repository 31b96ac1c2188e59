# A thin front door to CMake (see CMakePresets.json). Quick start: `make demo`, `make test`.
#   make demo      the main job: CUDA build on a machine with nvcc and a GPU, host emulator otherwise
#   make test      host build + every test (what CI runs)
#   make gpu-test  CUDA build + the tests labelled `gpu` (on a GPU machine)
#   make bench     benchmarks of the host emulator (bench/results/)
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

demo: $(BEST)
	build/$(BEST)/examples/platform_tour

bench: host
	build/host/bench/emu_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
	  --benchmark_out=bench/results/emu/emu_bench.json --benchmark_out_format=json

clean:
	rm -rf build
