# delayq — top-level entry points. See README.md.
#
#   make setup   install the Debian packages the build needs (idempotent)
#   make build   Release build in build/ (warnings are errors)
#   make test    build, run every test; then again under ASan+UBSan in build-asan/
#                (clang; it builds the fuzz targets too, which then replay their
#                corpora and fuzz briefly; test-release / test-asan run one pass alone)
#   make bench   build, run the benchmarks
#   make run     build, run delayqd in the foreground (ARGS="..." for flags)
#   make format  clang-format every tracked C++ source
#   make clean   remove the build directories

JOBS ?= 2
CMAKE ?= cmake
CTEST ?= ctest
NINJA ?= ninja
CLANG_FORMAT ?= clang-format

BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan

# Operations of the engine's randomized model test (read by the tests from
# DELAYQ_MODEL_OPS); the sanitizer pass is several times slower, so it runs fewer.
# At 2,000,000 the model test alone took ~97 CPU-seconds, the floor of the
# Release pass; make test-long runs LONG_MODEL_OPS (20,000,000).
MODEL_OPS ?= 500000
ASAN_MODEL_OPS ?= 200000

ASAN_OPTIONS ?= detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1

# Unity builds (CMake's UNITY_BUILD): each target's sources compile in
# batches of UNITY_BATCH files, one translation unit a batch, so the headers
# and the template code they share are compiled once a batch, not once a
# file. Measured from a fresh clone together with the black-box tests'
# -O0 (cmake/test_build.cmake): the Release build 339 CPU-s against 645,
# the sanitizer build ~720 against ~1,000. File-local names (anonymous
# namespaces, statics) must therefore differ between the files of a
# target: a clash is a compile error. UNITY=OFF compiles file by file
# (fewer files recompile after an edit).
UNITY ?= ON
UNITY_BATCH ?= 8
CMAKE_GENERATOR_FLAGS := -G Ninja -DCMAKE_UNITY_BUILD=$(UNITY) \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=$(UNITY_BATCH)

.DEFAULT_GOAL := build
.PHONY: setup build build-asan test test-release test-asan test-tsan test-long fuzz fuzz-replay \
	bench run format format-check clean

setup:
	bash scripts/setup.sh

# Recipes shared by several targets (sequential; no recursive make).
define configure_and_build_release
	$(CMAKE) -S . -B $(BUILD_DIR) $(CMAKE_GENERATOR_FLAGS) \
	  -DCMAKE_BUILD_TYPE=Release -DDELAYQ_WERROR=ON
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)
endef

# The sanitizer build: clang (the Release build is g++'s, so both compilers
# see the code), at -O1 with line tables only (-g1: what the sanitizers'
# stack traces use); per source file that takes about a third of the CPU
# time of g++ at -O2 -g. It builds the libFuzzer targets from its own
# libraries (DELAYQ_FUZZ), so they are not compiled a second time.
ASAN_CXX ?= clang++
ASAN_CXX_FLAGS ?= -O1 -g1 -DNDEBUG
# A sanitizer build directory configured without the fuzz targets (by g++,
# before the build moved to clang) is configured afresh: CMake cannot move a
# configured directory to another compiler and keep its settings.
define configure_asan
	@if [ -f $(ASAN_BUILD_DIR)/CMakeCache.txt ] && \
	  ! grep -q '^DELAYQ_FUZZ:BOOL=ON' $(ASAN_BUILD_DIR)/CMakeCache.txt; then \
	  echo "$(ASAN_BUILD_DIR)/ was configured by another compiler: configuring it afresh"; \
	  rm -rf $(ASAN_BUILD_DIR)/CMakeCache.txt $(ASAN_BUILD_DIR)/CMakeFiles; fi
	$(CMAKE) -S . -B $(ASAN_BUILD_DIR) $(CMAKE_GENERATOR_FLAGS) \
	  -DCMAKE_CXX_COMPILER=$(ASAN_CXX) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(ASAN_CXX_FLAGS)" \
	  -DDELAYQ_SANITIZE=ON -DDELAYQ_FUZZ=ON -DDELAYQ_WERROR=ON -DDELAYQ_BENCH=OFF
endef
define configure_and_build_asan
	$(configure_asan)
	$(CMAKE) --build $(ASAN_BUILD_DIR) -j $(JOBS)
endef

define ctest_release
	DELAYQ_MODEL_OPS=$(MODEL_OPS) \
	  $(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)
endef

# The sanitizer pass runs more tests at once than there are cores: its
# tests, like the Release ones, mostly wait on sockets and timers, and
# nothing else runs beside them.
ASAN_TEST_JOBS ?= 4
define ctest_asan
	DELAYQ_MODEL_OPS=$(ASAN_MODEL_OPS) \
	ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
	  $(CTEST) --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j $(ASAN_TEST_JOBS)
endef

build: setup
	$(configure_and_build_release)

build-asan: setup
	$(configure_and_build_asan)

# The Release tests mostly wait (on sockets, timers, the servers they
# start): the sanitizer build runs beside them at the lowest CPU priority
# (nice 19), so it takes what the tests leave and gives a core back to them
# at once. Its output goes to $(ASAN_BUILD_LOG), shown when it fails. If the
# Release tests fail, the build is stopped (ninja passes its SIGTERM on to
# the compilers) and the run fails with them. Not in a session of its own
# (setsid): the kernel's autogroups would then share the CPU between it and
# the tests as equals, whatever its nice value.
ASAN_BUILD_LOG ?= $(ASAN_BUILD_DIR)/build.log
define ctest_release_beside_asan_build
	$(configure_asan)
	@nice -n 19 $(NINJA) -C $(ASAN_BUILD_DIR) -j $(JOBS) >$(ASAN_BUILD_LOG) 2>&1 & \
	asan=$$!; trap 'kill -TERM $$asan 2>/dev/null' EXIT; \
	echo "sanitizer build started beside the Release tests (log: $(ASAN_BUILD_LOG))"; \
	$(ctest_release) || exit $$?; \
	echo "--- waiting for the sanitizer build"; \
	if wait $$asan; then tail -n 1 $(ASAN_BUILD_LOG); trap - EXIT; \
	else tail -n 200 $(ASAN_BUILD_LOG); echo "sanitizer build failed (log: $(ASAN_BUILD_LOG))" >&2; exit 1; fi
endef

# Release pass first, the sanitizer build beside it (above); the sanitizer
# pass only if the Release one succeeded; then every fuzz target replays
# its corpus and fuzzes briefly (long fuzzing: make fuzz).
test: format-check build
	$(ctest_release_beside_asan_build)
	$(ctest_asan)
	$(replay_fuzzers)
	$(call run_fuzzers,$(shell expr $(TEST_FUZZ_SECONDS) / 9 + 1))

# libFuzzer targets (built in the sanitizer build, see above), run on scratch
# copies of their seed corpora for FUZZ_SECONDS in all (split between the targets); a crash or a failed check
# fails the run. Inputs may be as large as the server takes them: the HTTP
# body limit (8 MiB) for the JSON and HTTP targets, 1 MiB for the beanstalkd
# decoder (well past its 64 KiB job and 224-byte line limits); the seeds
# include the hostile suite's inputs (JSON nested 300,000 deep, ...).
FUZZ_SECONDS ?= 60
# make test fuzzes this long in all, after the replay (make fuzz: FUZZ_SECONDS).
TEST_FUZZ_SECONDS ?= 40
# Scratch copies of the corpora (what fuzzing adds to them).
FUZZ_DIR ?= build-fuzz
FUZZ_TARGETS := beanstalk_decoder_fuzz http_api_fuzz http_request_fuzz json_input_fuzz \
	access_fuzz auth_file_fuzz tls_front_door_fuzz tls_session_fuzz journal_replay_fuzz
FUZZ_EACH = $(shell expr $(FUZZ_SECONDS) / 9 + 1)
FUZZ_MAX_LEN_HTTP ?= 8388608
# A report of either sanitizer ends the run (the build does not recover).
FUZZ_ENV = UBSAN_OPTIONS=print_stacktrace=1
FUZZ_MAX_LEN_BEANSTALK ?= 1048576
# The access target's scripts and the token file: tens of commands, a file
# of a few tokens.
FUZZ_MAX_LEN_ACCESS ?= 65536
# The TLS front door's input: a connection's first bytes (a ClientHello is
# under 2 KiB); the TLS session's: a few records.
FUZZ_MAX_LEN_TLS ?= 65536
# The journal's: one or two segment files (a few hundred records).
FUZZ_MAX_LEN_JOURNAL ?= 262144
define build_fuzzers
	$(configure_asan)
	$(CMAKE) --build $(ASAN_BUILD_DIR) -j $(JOBS) --target $(FUZZ_TARGETS)
endef

# Each target for $(1) seconds, on scratch copies of its corpus: two at a
# time (libFuzzer runs on one core), each one's output kept in
# $(FUZZ_DIR)/<target>.log and shown when the pair is done; a crash or a
# failed check of either fails the run.
# $(call fuzz_pair,seconds,target 1,options 1,target 2,options 2)
define fuzz_pair
	@$(FUZZ_ENV) $(ASAN_BUILD_DIR)/$(strip $(2)) -max_total_time=$(1) -print_final_stats=1 $(3) \
	  >$(FUZZ_DIR)/$(strip $(2)).log 2>&1 & first=$$!; \
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/$(strip $(4)) -max_total_time=$(1) -print_final_stats=1 $(5) \
	  >$(FUZZ_DIR)/$(strip $(4)).log 2>&1; second=$$?; \
	wait $$first; first=$$?; \
	for t in $(strip $(2)) $(strip $(4)); do echo "--- fuzz: $$t"; cat $(FUZZ_DIR)/$$t.log; done; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]
endef
# $(call fuzz_one,seconds,target,options): one target alone, likewise.
define fuzz_one
	@$(FUZZ_ENV) $(ASAN_BUILD_DIR)/$(strip $(2)) -max_total_time=$(1) -print_final_stats=1 $(3) \
	  >$(FUZZ_DIR)/$(strip $(2)).log 2>&1; status=$$?; \
	echo "--- fuzz: $(strip $(2))"; cat $(FUZZ_DIR)/$(strip $(2)).log; [ $$status -eq 0 ]
endef
define run_fuzzers
	mkdir -p $(FUZZ_DIR)/corpus-beanstalk $(FUZZ_DIR)/corpus-http $(FUZZ_DIR)/corpus-json \
	  $(FUZZ_DIR)/corpus-http-request $(FUZZ_DIR)/corpus-access $(FUZZ_DIR)/corpus-auth-file \
	  $(FUZZ_DIR)/corpus-tls-front-door $(FUZZ_DIR)/corpus-tls-session $(FUZZ_DIR)/corpus-journal
	$(call fuzz_pair,$(1),beanstalk_decoder_fuzz,-max_len=$(FUZZ_MAX_LEN_BEANSTALK) \
	  -dict=fuzz/beanstalk_decoder.dict $(FUZZ_DIR)/corpus-beanstalk fuzz/corpus/beanstalk,\
	  http_api_fuzz,-max_len=$(FUZZ_MAX_LEN_HTTP) -dict=fuzz/http_api.dict \
	  $(FUZZ_DIR)/corpus-http fuzz/corpus/http)
	$(call fuzz_pair,$(1),http_request_fuzz,-max_len=$(FUZZ_MAX_LEN_HTTP) \
	  -dict=fuzz/http_request.dict $(FUZZ_DIR)/corpus-http-request fuzz/corpus/http-request,\
	  json_input_fuzz,-max_len=$(FUZZ_MAX_LEN_HTTP) -dict=fuzz/json.dict \
	  $(FUZZ_DIR)/corpus-json fuzz/corpus/json)
	$(call fuzz_pair,$(1),access_fuzz,-max_len=$(FUZZ_MAX_LEN_ACCESS) -dict=fuzz/access.dict \
	  $(FUZZ_DIR)/corpus-access fuzz/corpus/access,\
	  auth_file_fuzz,-max_len=$(FUZZ_MAX_LEN_ACCESS) $(FUZZ_DIR)/corpus-auth-file fuzz/corpus/auth-file)
	$(call fuzz_pair,$(1),tls_front_door_fuzz,-max_len=$(FUZZ_MAX_LEN_TLS) \
	  $(FUZZ_DIR)/corpus-tls-front-door fuzz/corpus/tls-front-door,\
	  tls_session_fuzz,-max_len=$(FUZZ_MAX_LEN_TLS) $(FUZZ_DIR)/corpus-tls-session fuzz/corpus/tls-session)
	$(call fuzz_one,$(1),journal_replay_fuzz,-max_len=$(FUZZ_MAX_LEN_JOURNAL) \
	  $(FUZZ_DIR)/corpus-journal fuzz/corpus/journal)
endef

# Each target once over its seed corpus (libFuzzer's -runs=0: every input
# is run, nothing new is tried): what CI runs, in seconds.
define replay_fuzzers
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/beanstalk_decoder_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_BEANSTALK) \
	  fuzz/corpus/beanstalk
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/http_api_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_HTTP) fuzz/corpus/http
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/http_request_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_HTTP) \
	  fuzz/corpus/http-request
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/json_input_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_HTTP) fuzz/corpus/json
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/access_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_ACCESS) fuzz/corpus/access
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/auth_file_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_ACCESS) \
	  fuzz/corpus/auth-file
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/tls_front_door_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_TLS) \
	  fuzz/corpus/tls-front-door
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/tls_session_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_TLS) \
	  fuzz/corpus/tls-session
	$(FUZZ_ENV) $(ASAN_BUILD_DIR)/journal_replay_fuzz -runs=0 -max_len=$(FUZZ_MAX_LEN_JOURNAL) \
	  fuzz/corpus/journal
endef

fuzz: setup
	$(build_fuzzers)
	$(call run_fuzzers,$(FUZZ_EACH))

fuzz-replay: setup
	$(build_fuzzers)
	$(replay_fuzzers)

# The randomized model tests at sizes too large for every run: the engine
# against its reference, the Redis backend against it, the horizon against
# a backend without one, and the crash test's rounds.
LONG_MODEL_OPS ?= 20000000
test-long: build
	DELAYQ_MODEL_OPS=$(LONG_MODEL_OPS) DELAYQ_REDIS_MODEL_OPS=400000 DELAYQ_HORIZON_OPS=100000 \
	  DELAYQ_CRASH_ROUNDS=40 $(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) \
	  -R 'Model|Random|Crash'

test-release: build
	$(ctest_release)

# ThreadSanitizer over the tests whose code crosses threads: the store's
# writer thread and its callbacks, the journal's syncer, the loop's
# polling, the Local backend's durability pipeline, the crash test's
# clients (docs/architecture.md, "Threads"). Its own build (build-tsan/):
# not part of make test, which it would lengthen by a whole compilation.
TSAN_BUILD_DIR ?= build-tsan
TSAN_TESTS ?= Writer|Journal|LocalBackend|Horizon|RunEventLoop|EventLoop|HttpApiStore|Compaction|DiskFull|RocksStore|Crash
test-tsan: setup
	$(CMAKE) -S . -B $(TSAN_BUILD_DIR) $(CMAKE_GENERATOR_FLAGS) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELAYQ_TSAN=ON -DDELAYQ_WERROR=ON -DDELAYQ_BENCH=OFF
	$(CMAKE) --build $(TSAN_BUILD_DIR) -j $(JOBS) --target delayq_server_tests delayq_core_tests
	TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1 \
	  DELAYQ_CRASH_ROUNDS=3 \
	  $(CTEST) --test-dir $(TSAN_BUILD_DIR) --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

test-asan: build-asan
	$(ctest_asan)

# bench/horizon_bench.sh (memory per delayed job, restart time) fills the
# servers with HORIZON_BENCH_JOBS delayed jobs (+ HORIZON_BENCH_READY ready
# ones); at full size it takes several minutes and a few GB of memory.
# HORIZON_BENCH=0 skips it; e.g. make bench HORIZON_BENCH_JOBS=200000 HORIZON_BENCH_READY=20000.
HORIZON_BENCH ?= 1
HORIZON_BENCH_JOBS ?= 10000000
HORIZON_BENCH_READY ?= 1000000
# Each benchmark's stdout (its `name: value` lines, headline last) is kept
# in $(BENCH_OUT)/<name>.txt as it is shown; make bench ends with each
# one's headline, the server's (lifecycle_vs_beanstalkd_c50) last.
BENCH_OUT ?= $(BUILD_DIR)/bench-results
ifeq ($(HORIZON_BENCH),0)
run_horizon_bench = echo "bench: bench/horizon_bench.sh skipped (HORIZON_BENCH=0)" | tee $(BENCH_OUT)/horizon.txt
else
run_horizon_bench = HORIZON_BENCH_JOBS=$(HORIZON_BENCH_JOBS) HORIZON_BENCH_READY=$(HORIZON_BENCH_READY) \
	  bash bench/horizon_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/horizon.txt
endif

bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench: build
	@test -x $(BUILD_DIR)/engine_bench || \
	  { echo "bench: $(BUILD_DIR)/engine_bench was not built (CMake builds it only when bench/engine_bench.cc exists)" >&2; exit 1; }
	@mkdir -p $(BENCH_OUT)
	$(BUILD_DIR)/engine_bench | tee $(BENCH_OUT)/engine.txt
	bash bench/server_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/server.txt
	bash bench/put_budget.sh $(BUILD_DIR) | tee $(BENCH_OUT)/put_budget.txt
	$(run_horizon_bench)
	bash bench/http_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/http.txt
	bash bench/auth_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/auth.txt
	bash bench/tls_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/tls.txt
	bash bench/redis_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/redis.txt
	bash bench/redis_call_cost.sh $(BUILD_DIR) | tee $(BENCH_OUT)/redis_call_cost.txt
	bash bench/delayqd_redis_cost.sh $(BUILD_DIR) | tee $(BENCH_OUT)/delayqd_redis_cost.txt
	bash bench/push_bench.sh $(BUILD_DIR) | tee $(BENCH_OUT)/push.txt
	@echo "--- headlines (all figures: $(BENCH_OUT)/)"
	@for b in engine put_budget horizon http auth tls redis redis_call_cost delayqd_redis_cost push server; do \
	  tail -n 1 $(BENCH_OUT)/$$b.txt; done

# Runs the server in the foreground (Ctrl-C stops it). Flags go in ARGS,
# e.g. make run ARGS="-p 11301 -V".
ARGS ?=
run: build
	exec $(BUILD_DIR)/delayqd $(ARGS)

# Tracked C++ sources (git ls-files); outside a git checkout, every C++ file
# under the source directories.
format:
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "format: $(CLANG_FORMAT) not found; run make setup" >&2; exit 1; }
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git ls-files -z -- '*.h' '*.hh' '*.hpp' '*.cc' '*.cpp'; \
	else \
	  find include src tests bench \( -name '*.h' -o -name '*.hh' -o -name '*.hpp' \
	    -o -name '*.cc' -o -name '*.cpp' \) -print0 2>/dev/null; \
	fi | xargs -0 -r $(CLANG_FORMAT) -i

# Fails, naming the files, when a tracked C++ source is not as make format
# would leave it (make test runs it first: seconds).
format-check:
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "format-check: $(CLANG_FORMAT) not found; run make setup" >&2; exit 1; }
	@git ls-files -z -- '*.h' '*.hh' '*.hpp' '*.cc' '*.cpp' | \
	  xargs -0 -r $(CLANG_FORMAT) --dry-run -Werror || \
	  { echo "format-check: run make format" >&2; exit 1; }

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) $(TSAN_BUILD_DIR) $(FUZZ_DIR)
