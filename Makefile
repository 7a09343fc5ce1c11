# harvestd: one Makefile. `make` builds, `make check` runs every test, `make run` tries it out.
#
# Knobs: BUILD (output directory), SANITIZER (address,undefined | thread), ERR=0 (no -Werror),
# OPT, CFLAGS/LDFLAGS (appended, never clobbered), PREFIX/DESTDIR (install), PYTEST_ARGS.

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

STD   = -std=c11 -D_GNU_SOURCE
WARN  = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
        -Wpointer-arith -Wcast-qual -Wwrite-strings -Wundef -Wimplicit-fallthrough
ifeq ($(ERR),1)
WARN += -Werror
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
PKGS        = libuv gumbo libcjson liburiparser zlib inih libsystemd libbrotlidec libidn2
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

LLHTTP_SRC_DIR ?= /usr/share/llhttp
LLHTTP_INC_DIR ?= /usr/share/include/llhttp
LLHTTP_LIB      = $(BUILD)/third_party/libllhttp.a

DEPS_CFLAGS = $(PKG_CFLAGS) -I$(LLHTTP_INC_DIR) -Iinclude -DHV_VERSION='"$(VERSION)"' -fPIE
DEPS_LIBS   = $(LLHTTP_LIB) $(PKG_LIBS) -lmbedtls -lmbedx509 -lmbedcrypto -lm

FINAL_CFLAGS  = $(STD) $(WARN) $(OPT) $(DEBUG) $(DEPS_CFLAGS) $(CFLAGS)
FINAL_LDFLAGS = $(SAN_LDFLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)

SRCS      = $(sort $(wildcard src/*.c))
LIB_SRCS  = $(filter-out src/main.c,$(SRCS))
LIB_OBJS  = $(LIB_SRCS:%.c=$(BUILD)/%.o)
MAIN_OBJ  = $(BUILD)/src/main.o
UNIT_SRCS = $(sort $(wildcard tests/unit/*.c))
UNIT_OBJS = $(UNIT_SRCS:%.c=$(BUILD)/%.o)
TOOL_SRCS = $(sort $(wildcard tests/tools/*.c))
TOOLS     = $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tools/%)

BIN       = $(BUILD)/harvestd
UNIT_BIN  = $(BUILD)/unit-tests

.PHONY: all deps run test check integration asan ubsan tsan lint clean install bench
all: $(BIN)

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

$(UNIT_BIN): $(UNIT_OBJS) $(LIB_OBJS) $(LLHTTP_LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $(UNIT_OBJS) $(LIB_OBJS) $(DEPS_LIBS) $(UNIT_LIBS)

$(BUILD)/tools/%: tests/tools/%.c $(LIB_OBJS) $(LLHTTP_LIB) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(FINAL_CFLAGS) $(FINAL_LDFLAGS) -o $@ $< $(LIB_OBJS) $(DEPS_LIBS)

# `make run`: the daemon in the foreground with its spool under var/ (conf/harvestd-dev.conf),
# fed the sample URL list; drop more files into var/spool/incoming/ from another terminal.
RUN_STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p var/spool/incoming
	@cp conf/sample-urls.txt var/spool/incoming/.sample-$(RUN_STAMP).tmp
	@mv var/spool/incoming/.sample-$(RUN_STAMP).tmp var/spool/incoming/sample-$(RUN_STAMP).txt
	@echo "harvestd: dropped var/spool/incoming/sample-$(RUN_STAMP).txt; output in var/spool/out/ (Ctrl-C stops)"
	./$(BIN) -c conf/harvestd-dev.conf

test: $(UNIT_BIN)
	./$(UNIT_BIN)

integration: $(BIN) $(TOOLS)
	HARVESTD_BIN=$(abspath $(BIN)) HARVESTD_TOOLS=$(abspath $(BUILD)/tools) HARVESTD_SANITIZER=$(SANITIZER) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration $(PYTEST_ARGS)

check: deps
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory integration

# Calls we keep out of the code base (see README, "Code rules").
lint:
	@! grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets)\s*\(' src/*.c src/*.h include/harvestd/*.h \
	    || { echo "lint: forbidden call above" >&2; exit 1; }

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

tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread test

install: $(BIN)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/harvestd
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
	rm -rf build build-asan build-ubsan build-tsan

-include $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(UNIT_OBJS:.o=.d)
