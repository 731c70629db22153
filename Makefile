# The two commands of the quick start:
#   make run   installs what is missing, builds the brigade binary alone, runs the default job
#   make test  installs what is missing, builds the rest in the same tree (nothing make run built
#              is built again), runs every test (and the sanitizer subset)
JOBS ?= $(shell nproc)
BRIGADE := build/release/brigade

.PHONY: deps deps-run configure brigade build run test test-release test-asan bench clean format

# make run installs what building and the default job need; the tests' packages come with make test.
deps:
	@bash scripts/install-deps.sh

deps-run:
	@bash scripts/install-deps.sh run

configure: deps-run
	@cmake --preset release >/dev/null

# Only what the default job runs: the rooms of the library and the command line (ninja prints a
# progress line per step).
brigade: configure
	@echo "make: building $(BRIGADE) (the first time, about 5 minutes on 2 cores)"
	@cmake --build --preset release -j $(JOBS) --target brigade

build: deps configure
	@cmake --build --preset release -j $(JOBS)

run: brigade
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
