# The two commands of the quick start:
#   make run   installs what is missing, builds Release, runs the default training job
#   make test  installs what is missing, builds, runs every test (and the sanitizer subset)
JOBS ?= $(shell nproc)
BRIGADE := build/release/brigade

.PHONY: deps build run test test-release test-asan bench clean format

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

run: build
	$(BRIGADE) launch --nproc 2 -- train configs/default.toml

test: test-release test-asan

test-release: build
	ctest --preset release -j $(JOBS)

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

bench: build
	@echo "benchmarks: see bench/RESULTS.md for the commands"

format:
	@find src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf build
