# tensord — the two commands in the README, and a few more.
#   make demo   install deps, build, train the digits MLP through the daemon, then k-NN and meta mode
#   make test   install deps, build, run every C++ and Python test
#   make bench  build, run every benchmark of bench/ and print one table (BENCH_ARGS=--quick for a smoke run)
#   make fuzz   build the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and run each FUZZ_SECONDS
PY      := /usr/bin/python3
BUILD   ?= build
JOBS    ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build install-dev demo test test-cpp test-python test-fuzz fuzz fuzz-build sanitize tsan clean bench bench-meta

all: build

deps:
	scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	scripts/install-dev.sh $(abspath $(BUILD))

install-dev: build

demo: build
	$(PY) examples/digits_mlp.py
	$(PY) examples/digits_knn.py
	$(PY) examples/infer_shapes.py

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-python: build
	TENSORD_BIN=$(abspath $(BUILD))/bin/tensord $(PY) -m pytest tests/python -q -p no:cacheprovider

# CI's short fuzz run: every crash reproducer once, then each target for 30 s.
test-fuzz: FUZZ_SECONDS = 30
test-fuzz: fuzz

test: test-cpp test-python test-fuzz

# Every figure of bench/RESULTS.md beside its peer, one table; writes $(BUILD)/bench.json
# and $(BUILD)/bench.md (a benchmark: no pass/fail on speed). See bench/RESULTS.md.
BENCH_ARGS ?=
bench: build
	$(PY) bench/run.py --build $(abspath $(BUILD)) --json $(abspath $(BUILD))/bench.json \
	  --markdown $(abspath $(BUILD))/bench.md $(BENCH_ARGS)

# Meta cost per op, tensord vs torch 1.13's meta device (a benchmark: no pass/fail).
bench-meta: build
	$(PY) bench/meta_bench.py; if [ -x $(BUILD)/bin/meta_bench ]; then $(BUILD)/bin/meta_bench; fi

# Address + undefined behaviour sanitizers over the C++ tests.
sanitize: deps
	cmake -S . -B build-asan -G Ninja -DTENSORD_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j $(JOBS)
	ctest --test-dir build-asan --output-on-failure -j $(JOBS)

tsan: deps
	cmake -S . -B build-tsan -G Ninja -DTENSORD_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-tsan -j $(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j $(JOBS)

# libFuzzer targets over every decoder of client input (tests/fuzz/): a
# separate clang build (Debian's clang-14 and libFuzzer), libraries under
# ASan+UBSan. Each target first runs its crash reproducers
# (tests/fuzz/regressions/NAME, each once), then fuzzes for FUZZ_SECONDS from
# a copy of its seed corpus (the repo is never written); the safetensors
# header (parsed in Python) gets a fixed-seed mutation run. Findings go to
# FUZZ_OUT/NAME.
FUZZ_SECONDS ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_OUT     ?= $(abspath $(FUZZ_BUILD))/findings
FUZZ_TARGETS := schema shape_rule artifact config wire session stream

fuzz-build: deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORD_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addsuffix _fuzz,$(FUZZ_TARGETS))

fuzz: fuzz-build
	scripts/run-fuzz.sh $(abspath $(FUZZ_BUILD))/bin $(FUZZ_SECONDS) $(FUZZ_OUT) $(FUZZ_TARGETS)
	TENSORD_FUZZ_ITERATIONS=$$(( $(FUZZ_SECONDS) * 300 )) $(PY) -m pytest tests/python/test_serialization_fuzz.py -q -p no:cacheprovider

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
