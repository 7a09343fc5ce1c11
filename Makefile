# harvestd: one Makefile. `make` builds, `make check` runs every test, `make run` tries it out.
#
# Knobs: BUILD (output directory), SANITIZER (address,undefined | thread), ERR=0 (no -Werror),
# OPT, CFLAGS/LDFLAGS (appended, never clobbered), PREFIX/DESTDIR (install), PYTEST_ARGS,
# FUZZ_SECONDS (per target, `make fuzz`), FUZZ_CC (the clang that builds the fuzz targets),
# ARGS (more options for the daemon of `make run`).

VERSION    := 0.1.0
BUILD      ?= build
PKG_CONFIG ?= pkg-config
PYTHON     ?= /usr/bin/python3
ERR        ?= 1
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR    ?= /lib/systemd/system
DOCDIR     ?= $(PREFIX)/share/doc/harvestd
MANDIR     ?= $(PREFIX)/share/man

STD   = -std=c11 -D_GNU_SOURCE
WARN  = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
        -Wpointer-arith -Wcast-qual -Wwrite-strings -Wundef -Wimplicit-fallthrough
ifeq ($(ERR),1)
WARN += -Werror
endif
# clang (it builds the fuzz targets) warns about the fall-throughs inside uthash's macros,
# which gcc rightly files under the system header that defines them.
ifneq ($(findstring clang,$(CC)),)
WARN += -Wno-implicit-fallthrough
endif

ifneq ($(SANITIZER),)
OPT   ?= -O1
DEBUG  = -g -fsanitize=$(SANITIZER) -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_LDFLAGS = -fsanitize=$(SANITIZER)
else
OPT   ?= -O2
DEBUG  = -g -fno-omit-frame-pointer -DNDEBUG -D_FORTIFY_SOURCE=2 -fstack-protector-strong
SAN_LDFLAGS =
endif
HARDEN_LDFLAGS = -Wl,-z,relro,-z,now -pie

# Libraries with a pkg-config file; the rest are plain -l flags (mbedtls ships no .pc).
PKGS        = libuv gumbo libcjson liburiparser zlib inih libsystemd libbrotlidec libzstd libnghttp2 libidn2 hiredis lmdb libxxhash
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

LLHTTP_SRC_DIR ?= /usr/share/llhttp
LLHTTP_INC_DIR ?= /usr/share/include/llhttp
LLHTTP_LIB      = $(BUILD)/third_party/libllhttp.a

DEPS_CFLAGS = $(PKG_CFLAGS) -I$(LLHTTP_INC_DIR) -Iinclude -DHV_VERSION='"$(VERSION)"' -fPIE
DEPS_LIBS   = $(LLHTTP_LIB) $(PKG_LIBS) -lmbedtls -lmbedx509 -lmbedcrypto -lm

FINAL_CFLAGS  = $(STD) $(WARN) $(OPT) $(DEBUG) $(DEPS_CFLAGS) $(CFLAGS)
FINAL_LDFLAGS = $(SAN_LDFLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)

SRCS      = $(sort $(wildcard src/*.c src/html/*.c src/cmd/*.c))
LIB_SRCS  = $(filter-out src/main.c,$(SRCS))
LIB_OBJS  = $(LIB_SRCS:%.c=$(BUILD)/%.o)
MAIN_OBJ  = $(BUILD)/src/main.o
UNIT_SRCS = $(sort $(wildcard tests/unit/*.c))
UNIT_OBJS = $(UNIT_SRCS:%.c=$(BUILD)/%.o)
TOOL_SRCS = $(sort $(wildcard tests/tools/*.c))
TOOLS     = $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tools/%)

BIN       = $(BUILD)/harvestd
UNIT_BIN  = $(BUILD)/unit-tests

.PHONY: all deps run test check integration asan ubsan tsan lint clean install bench man \
        fuzz fuzz-replay fuzz-build fuzz-toolchain fuzz-bins fuzz-tls-seeds
all: $(BIN) man

deps:
	@./third_party/install-deps.sh

# Everything rebuilds when the flags change (the stamp holds the last flags used).
FLAGS_STAMP = $(BUILD)/.flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(FINAL_CFLAGS) $(FINAL_LDFLAGS)' | cmp -s - $@ || echo '$(FINAL_CFLAGS) $(FINAL_LDFLAGS)' > $@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) -MMD -MP -c $< -o $@

include third_party/llhttp.mk

$(BIN): $(MAIN_OBJ) $(LIB_OBJS) $(LLHTTP_LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $(MAIN_OBJ) $(LIB_OBJS) $(DEPS_LIBS)

# The unit tests also compress (brotli) to check the decoders.
UNIT_LIBS := $(shell $(PKG_CONFIG) --libs libbrotlienc 2>/dev/null)

# The manual pages: the prose of src/man/PAGE.in around the entries of the option and
# directive tables, which the binary itself writes (harvestd --help-man, src/cmd/man.c).
MAN_PAGES = $(BUILD)/man/harvestd.1 $(BUILD)/man/harvestd.conf.5
man: $(MAN_PAGES)

$(BUILD)/man/%: src/man/%.in $(BIN)
	@mkdir -p $(@D)
	./$(BIN) --help-man=$< > $@.tmp && mv $@.tmp $@

$(UNIT_BIN): $(UNIT_OBJS) $(LIB_OBJS) $(LLHTTP_LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $(UNIT_OBJS) $(LIB_OBJS) $(DEPS_LIBS) $(UNIT_LIBS)

$(BUILD)/tools/%: tests/tools/%.c $(LIB_OBJS) $(LLHTTP_LIB) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) $(FINAL_LDFLAGS) -o $@ $< $(LIB_OBJS) $(DEPS_LIBS)

# `make run`: the daemon in the foreground with its spool under var/ (conf/harvestd-dev.conf),
# fed the sample URL list; drop more files into var/spool/incoming/ from another terminal.
# ARGS go after the configuration, so they override it: ARGS='--metrics-listen 127.0.0.1:9500'.
ARGS ?=
RUN_STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p var/spool/incoming
	@cp conf/sample-urls.txt var/spool/incoming/.sample-$(RUN_STAMP).tmp
	@mv var/spool/incoming/.sample-$(RUN_STAMP).tmp var/spool/incoming/sample-$(RUN_STAMP).txt
	@echo "harvestd: dropped var/spool/incoming/sample-$(RUN_STAMP).txt; output in var/spool/out/ (Ctrl-C stops)"
	./$(BIN) -c conf/harvestd-dev.conf $(ARGS)

test: $(UNIT_BIN)
	./$(UNIT_BIN)

# The integration tests run PYTEST_JOBS at a time (pytest-xdist): they spend most of their time
# waiting on servers, timers and daemons, a quarter of it on the CPU. PYTEST_JOBS=0: one by one.
PYTEST_JOBS ?= 4
INTEGRATION_TESTS ?= tests/integration
integration: $(BIN) $(TOOLS)
	HARVESTD_BIN=$(abspath $(BIN)) HARVESTD_TOOLS=$(abspath $(BUILD)/tools) HARVESTD_SANITIZER=$(SANITIZER) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) $(INTEGRATION_TESTS) $(PYTEST_ARGS)

# The chaos test of the Redis fleet at length (test_97: 5,000 lines, 40 kills of daemons and Redis).
.PHONY: chaos
chaos: $(BIN) $(TOOLS)
	HARVESTD_CHAOS=long HARVESTD_BIN=$(abspath $(BIN)) HARVESTD_TOOLS=$(abspath $(BUILD)/tools) \
	    HARVESTD_SANITIZER=$(SANITIZER) $(PYTHON) -m pytest -q -p no:cacheprovider -s \
	    tests/integration/test_97_chaos.py $(PYTEST_ARGS)

# Also the sanitizer suites: unit and integration tests under ASan+UBSan (build-asan/), and
# every fuzz target over its committed corpus (build-fuzz/). The fuzz toolchain is checked
# first, so that a machine without clang fails at once rather than after the other suites.
check: deps
	@$(MAKE) --no-print-directory fuzz-toolchain
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory fuzz-replay

# ---- fuzzing (tests/fuzz): libFuzzer targets, built with clang into their own directory ----
#
# The project's sources are compiled again with -fsanitize=fuzzer-no-link,address,undefined
# into $(FUZZ_BUILD) (the rules above, run by a second make with BUILD, CC and SANITIZER set),
# and each target links them with libFuzzer. `make fuzz` fuzzes every target for FUZZ_SECONDS,
# keeping what it finds out of the committed corpus; `make fuzz-replay` runs each committed
# corpus file once and fails on any crash or sanitizer report.
FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN      = fuzzer-no-link,address,undefined
FUZZ_TARGETS  = http_response url config select charset robots html tls_client proxy_reply h2_frames \
                report_lines
FUZZ_BINS     = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)
# Seconds one input may run before libFuzzer reports it as a hang.
FUZZ_TIMEOUT ?= 30
# Longest input libFuzzer makes up (its default: 4096, or the largest corpus file). Pages must
# be able to pass the nesting bound (HV_PRESCAN_MAX_DEPTH elements).
FUZZ_MAX_LEN_html   = 65536
FUZZ_MAX_LEN_select = 65536
# libFuzzer's own leak check covers leaks; the suppressions are those of `make asan`.
FUZZ_ENV      = ASAN_OPTIONS=detect_leaks=1 \
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
                LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0

fuzz-toolchain:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { \
	    echo "fuzz: $(FUZZ_CC) not found; 'make deps' installs it (clang-14, libclang-rt-14-dev)" >&2; exit 1; }
	@mkdir -p $(FUZZ_BUILD)
	@printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d == 0 && n; }\n' \
	    > $(FUZZ_BUILD)/.probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined $(FUZZ_BUILD)/.probe.c -o $(FUZZ_BUILD)/.probe \
	    2>$(FUZZ_BUILD)/.probe.log || { cat $(FUZZ_BUILD)/.probe.log >&2; \
	    echo "fuzz: $(FUZZ_CC) cannot link libFuzzer and the sanitizers; 'make deps' installs libclang-rt-14-dev" >&2; exit 1; }

fuzz-build: fuzz-toolchain
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANITIZER=$(FUZZ_SAN) fuzz-bins

fuzz-bins: $(FUZZ_BINS)

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(LIB_OBJS) $(LLHTTP_LIB) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) -MMD -MP -fsanitize=fuzzer $(FINAL_LDFLAGS) \
	    -o $@ $< $(filter-out $(FUZZ_OWN_OBJS),$(LIB_OBJS)) $(DEPS_LIBS)

# A target that includes a module's source (to reach its statics) links without its object.
$(BUILD)/fuzz/tls_client $(BUILD)/fuzz/tls_client-record: FUZZ_OWN_OBJS = $(BUILD)/src/tls.o

# The proxy layers run alone, their chain (conn.c) and the DNS cache replaced by the target:
# only the plain modules they use are linked.
PROXY_REPLY_OBJS = $(addprefix $(BUILD)/src/,common.o detail.o log.o proxy.o guard.o url.o html/utf8.o)
$(BUILD)/fuzz/proxy_reply: tests/fuzz/proxy_reply.c tests/fuzz/fuzz.h $(LIB_OBJS) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) -MMD -MP -fsanitize=fuzzer $(FINAL_LDFLAGS) \
	    -o $@ $< $(PROXY_REPLY_OBJS) $(DEPS_LIBS)

# `make fuzz-tls-seeds`: record real handshakes against an in-memory mbedtls server as the
# tls_client corpus seeds (see tests/fuzz/tls_client.c); needed again when the ClientHello
# changes, since a recording replays only against the same client.
fuzz-tls-seeds: fuzz-toolchain
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANITIZER=$(FUZZ_SAN) \
	    $(FUZZ_BUILD)/fuzz/tls_client-record
	@mkdir -p tests/fuzz/corpus/tls_client
	$(FUZZ_ENV) $(FUZZ_BUILD)/fuzz/tls_client-record tests/fuzz/corpus/tls_client

$(BUILD)/fuzz/tls_client-record: tests/fuzz/tls_client.c tests/fuzz/fuzz.h $(LIB_OBJS) $(LLHTTP_LIB) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) -DHV_FUZZ_RECORD -MMD -MP $(FINAL_LDFLAGS) \
	    -o $@ $< $(filter-out $(FUZZ_OWN_OBJS),$(LIB_OBJS)) $(DEPS_LIBS)

# Each corpus file once (tests/fuzz/replay.sh): any crash, leak or sanitizer report fails the
# replay. Every file of every target is replayed even after one failed, so that one open
# defect does not hide another.
fuzz-replay: fuzz-build
	@failed=""; for t in $(FUZZ_TARGETS); do \
	    echo "fuzz-replay: $$t ($$(find tests/fuzz/corpus/$$t -type f | wc -l) inputs)"; \
	    $(FUZZ_ENV) tests/fuzz/replay.sh $(FUZZ_BUILD)/fuzz/$$t tests/fuzz/corpus/$$t \
	        $(FUZZ_BUILD)/replay-$$t.log -timeout=$(FUZZ_TIMEOUT) || failed="$$failed $$t"; \
	done; \
	[ -z "$$failed" ] || { echo "fuzz-replay: failed:$$failed (logs: $(FUZZ_BUILD)/replay-<target>.log)" >&2; exit 1; }

# `make fuzz FUZZ_SECONDS=N` (`make -j2 fuzz`: two targets at a time). libFuzzer runs in fork
# mode and goes on past a crash, so that a known defect whose reproducer sits in the corpus
# does not end every run at its first input; new inputs go to $(FUZZ_BUILD)/corpus/<target>/,
# crashes, leaks, timeouts and OOMs to $(FUZZ_BUILD)/crashes/<target>-*, and the target fails
# at the end if it left any there.
fuzz: $(FUZZ_TARGETS:%=fuzz-run-%)

fuzz-run-%: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/corpus/$* $(FUZZ_BUILD)/crashes
	@echo "fuzz: $* for $(FUZZ_SECONDS)s (log: $(FUZZ_BUILD)/fuzz-$*.log)"
	@before=$$(ls $(FUZZ_BUILD)/crashes | grep -c '^$*-'); \
	$(FUZZ_ENV) $(FUZZ_BUILD)/fuzz/$* -fork=1 -ignore_crashes=1 -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=$(FUZZ_TIMEOUT) -artifact_prefix=$(FUZZ_BUILD)/crashes/$*- \
	    $(if $(FUZZ_MAX_LEN_$*),-max_len=$(FUZZ_MAX_LEN_$*)) \
	    $(if $(wildcard tests/fuzz/$*.dict),-dict=tests/fuzz/$*.dict) \
	    $(FUZZ_BUILD)/corpus/$* tests/fuzz/corpus/$* >$(FUZZ_BUILD)/fuzz-$*.log 2>&1; \
	grep -E '^#[0-9]+: cov:' $(FUZZ_BUILD)/fuzz-$*.log | tail -n 1 | sed 's/^/fuzz: $*: /'; \
	after=$$(ls $(FUZZ_BUILD)/crashes | grep -c '^$*-'); \
	if [ "$$after" -ne "$$before" ]; then \
	    echo "fuzz: $*: $$((after - before)) new crash file(s) in $(FUZZ_BUILD)/crashes/:" >&2; \
	    ls -t $(FUZZ_BUILD)/crashes | grep '^$*-' | head -n $$((after - before)) | sed 's/^/    /' >&2; \
	    exit 1; \
	fi

# Calls we keep out of the code base (see README, "Code rules"), the include direction
# between layers (tests/lint/layers.txt; README, "How it works"), the documentation against
# the code (tests/lint/docs.py: every directive in conf/harvestd.conf and README.md, every
# option of every --help and every record key in README.md, the manual pages whole and read
# by groff without a warning, README's contents list against its headings), and the alerting
# rules (conf/harvestd-alerts.yml): valid for Prometheus, and firing on the cases of
# tests/promtool/ (promtool comes with Debian's prometheus package; `make deps`).
PROMTOOL ?= promtool
lint: man
	@! grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets)\s*\(' $(shell find src -name '*.[ch]') include/harvestd/*.h \
	    || { echo "lint: forbidden call above" >&2; exit 1; }
	@$(PYTHON) tests/lint/layers.py
	@$(PYTHON) tests/lint/docs.py --bin $(BIN) --man $(BUILD)/man
	@command -v $(PROMTOOL) >/dev/null 2>&1 || { \
	    echo "lint: $(PROMTOOL) not found; 'make deps' installs it (Debian package prometheus)" >&2; exit 1; }
	@$(PROMTOOL) check rules conf/harvestd-alerts.yml >/dev/null
	@cd tests/promtool && $(PROMTOOL) test rules harvestd-alerts.test.yml >/dev/null

# `make bench` (QUICK=1 for a short run): prints one table of figures with PASS/FAIL targets.
bench: deps
	@$(MAKE) --no-print-directory all $(TOOLS)
	HARVESTD_BIN=$(abspath $(BIN)) HARVESTD_TOOLS=$(abspath $(BUILD)/tools) BENCH_DIR=$(abspath $(BUILD)/bench) \
	    QUICK=$(QUICK) $(PYTHON) tests/bench/bench.py

asan: deps
	@LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0 \
	    $(MAKE) --no-print-directory BUILD=build-asan SANITIZER=address,undefined lint test integration

ubsan: deps
	@$(MAKE) --no-print-directory BUILD=build-ubsan SANITIZER=undefined test integration

# The unit tests (ThreadSanitizer makes the 40 MiB record tests take ~25 s: 120 s each), then
# the integration tests whose runs use the TLS crypto workers (every https test: the
# handshakes run on them) under ThreadSanitizer.
TSAN_INTEGRATION = tests/integration/test_30_tls.py tests/integration/test_27_http2.py \
                   tests/integration/test_99_proxy.py
tsan: deps
	@HV_TEST_TIMEOUT=$${HV_TEST_TIMEOUT:-120} \
	    $(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread test
	@$(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread integration \
	    INTEGRATION_TESTS="$(TSAN_INTEGRATION)"

install: $(BIN) man
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/harvestd
	install -D -m 0644 $(BUILD)/man/harvestd.1 $(DESTDIR)$(MANDIR)/man1/harvestd.1
	install -D -m 0644 $(BUILD)/man/harvestd.conf.5 $(DESTDIR)$(MANDIR)/man5/harvestd.conf.5
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/harvestd
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/harvestd/harvestd.conf ]; then \
	    install -m 0644 conf/harvestd.conf $(DESTDIR)$(SYSCONFDIR)/harvestd/harvestd.conf.new; \
	    echo "kept $(SYSCONFDIR)/harvestd/harvestd.conf; new default in harvestd.conf.new"; \
	else install -m 0644 conf/harvestd.conf $(DESTDIR)$(SYSCONFDIR)/harvestd/harvestd.conf; fi
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
	    systemd/harvestd.service.in > $(DESTDIR)$(UNITDIR)/harvestd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/harvestd.service
	install -D -m 0644 systemd/harvestd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/harvestd.conf
	install -D -m 0644 systemd/harvestd.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/harvestd.conf
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md

clean:
	rm -rf build build-asan build-ubsan build-tsan $(FUZZ_BUILD)

-include $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(UNIT_OBJS:.o=.d) $(FUZZ_BINS:=.d) $(BUILD)/fuzz/tls_client-record.d
