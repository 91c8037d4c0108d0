# perfab: everything the project needs is installed from here, nothing by hand.
#   make demo   run the bundled default experiment and print its report
#   make test   lint (ruff) and run the whole test suite
#   make studies  run the four bundled studies (examples/00N-*/) and print their tables
#   make kernel-studies  run the five studies on real kernels (examples/kernel-00N-*/: builds and boots Linux 6.1 under QEMU)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CC     ?= gcc
SITES  ?= 2048

# rustup's toolchain (Debian's cargo is too old for the native crates)
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: demo test studies sysdeps workloads native tcg-plugin clean kernel-deps kernel-studies

demo: $(STAMP) workloads
	rm -f .perfab/demo.db .perfab/demo.db-wal .perfab/demo.db-shm
	$(VENV)/bin/perfab run examples/default.toml --db .perfab/demo.db
	$(VENV)/bin/perfab run examples/cachegrind.toml --db .perfab/demo.db

test: $(STAMP) sysdeps kernel-deps workloads native tcg-plugin
	$(PY) -m ruff check src tests bench
	$(PY) -m pytest -q

# The bundled studies (see each examples/00N-*/README.md): each spec builds its
# sides with the study's own Makefile into .perfab/build/<experiment>/<side>.
STUDIES_DB := .perfab/studies.db
ASM_BUILD  := .perfab/build/asm-inline

studies: $(STAMP) sysdeps native
	rm -f $(STUDIES_DB) $(STUDIES_DB)-wal $(STUDIES_DB)-shm
	$(VENV)/bin/perfab run examples/001-asm-inline/cachegrind.toml --db $(STUDIES_DB)
	$(VENV)/bin/perfab size $(ASM_BUILD)/asm/lockops $(ASM_BUILD)/asm_inline/lockops
	$(VENV)/bin/perfab run examples/002-false-sharing/time.toml --db $(STUDIES_DB)
	$(VENV)/bin/perfab run examples/003-paravirt-lock/cachegrind.toml --db $(STUDIES_DB)
	$(VENV)/bin/perfab run examples/003-paravirt-lock/time.toml --db $(STUDIES_DB)
	$(VENV)/bin/perfab run examples/004-tlb-shootdown/sweep.toml --db $(STUDIES_DB)

# The kernel studies (see each examples/kernel-00N-*/README.md): every side boots a
# Linux 6.1 built from Debian's source (tinyconfig + the study's options and patches)
# under QEMU, one guest per run.  Kernels are cached under .perfab/kernel by source,
# resolved config, patches and compiler, so a second `make kernel-studies` builds
# nothing; sides with the same options share one build.  Each study's report is printed
# after its runs (000, 001 and 004 with the size table of their two vmlinux).
KSTUDIES_DB := .perfab/kernel-studies.db
KSTUDIES    := kernel-000-spin-unlock kernel-001-asm-inline kernel-002-osq-padding \
               kernel-003-paravirt-spinlocks kernel-004-tlb-shootdown

kernel-studies: $(STAMP) sysdeps kernel-deps native
	rm -f $(KSTUDIES_DB) $(KSTUDIES_DB)-wal $(KSTUDIES_DB)-shm
	for s in $(KSTUDIES); do \
		$(VENV)/bin/perfab run examples/$$s/spec.toml --db $(KSTUDIES_DB) || exit 1; \
	done
	$(VENV)/bin/perfab report kernel-tlb-shootdown --db $(KSTUDIES_DB) --format lkp
	PERFAB_KERNEL_BUILDS=1 $(PY) -m pytest -q tests/kernel_build

# System tools the measurement backends and tests rely on; installed only if absent.  kexec-tools is
# installed without its boot-time loading (load_kexec false): a plain reboot stays a firmware reboot.
sysdeps:
	@missing=""; \
	command -v perf >/dev/null 2>&1 || missing="$$missing linux-perf"; \
	command -v valgrind >/dev/null 2>&1 || missing="$$missing valgrind"; \
	command -v $(CC) >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v readelf >/dev/null 2>&1 || missing="$$missing binutils"; \
	command -v clang >/dev/null 2>&1 || missing="$$missing clang"; \
	command -v llvm-dwarfdump >/dev/null 2>&1 || missing="$$missing llvm"; \
	command -v cargo >/dev/null 2>&1 || missing="$$missing cargo"; \
	command -v git >/dev/null 2>&1 || missing="$$missing git"; \
	command -v nginx >/dev/null 2>&1 || missing="$$missing nginx-light"; \
	command -v ab >/dev/null 2>&1 || missing="$$missing apache2-utils"; \
	command -v wrk >/dev/null 2>&1 || missing="$$missing wrk"; \
	command -v stress-ng >/dev/null 2>&1 || missing="$$missing stress-ng"; \
	command -v hackbench >/dev/null 2>&1 || missing="$$missing rt-tests"; \
	command -v sysbench >/dev/null 2>&1 || missing="$$missing sysbench"; \
	command -v hyperfine >/dev/null 2>&1 || missing="$$missing hyperfine"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-system-x86"; \
	dpkg -s busybox-static >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	ls /boot/vmlinuz-* >/dev/null 2>&1 || missing="$$missing linux-image-amd64"; \
	dpkg -s kexec-tools >/dev/null 2>&1 || missing="$$missing kexec-tools"; \
	{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } \
		|| missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		echo "kexec-tools kexec-tools/load_kexec boolean false" | debconf-set-selections 2>/dev/null; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# What building and booting a kernel side needs: Debian's 6.1 source, the kernel's
# build tools, QEMU and a static busybox for the guest; installed only if absent.
kernel-deps:
	@missing=""; \
	[ -f /usr/src/linux-source-6.1.tar.xz ] || missing="$$missing linux-source-6.1"; \
	command -v make >/dev/null 2>&1 || missing="$$missing make"; \
	command -v $(CC) >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v ld >/dev/null 2>&1 || missing="$$missing binutils"; \
	command -v flex >/dev/null 2>&1 || missing="$$missing flex"; \
	command -v bison >/dev/null 2>&1 || missing="$$missing bison"; \
	command -v bc >/dev/null 2>&1 || missing="$$missing bc"; \
	command -v cpio >/dev/null 2>&1 || missing="$$missing cpio"; \
	command -v perl >/dev/null 2>&1 || missing="$$missing perl"; \
	command -v xz >/dev/null 2>&1 || missing="$$missing xz-utils"; \
	command -v git >/dev/null 2>&1 || missing="$$missing git"; \
	command -v patch >/dev/null 2>&1 || missing="$$missing patch"; \
	command -v ccache >/dev/null 2>&1 || missing="$$missing ccache"; \
	[ -f /usr/include/gelf.h ] || missing="$$missing libelf-dev"; \
	[ -f /usr/include/openssl/ssl.h ] || missing="$$missing libssl-dev"; \
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-system-x86"; \
	dpkg -s busybox-static >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# The bundled workload, built both ways (see examples/default.toml).
workloads: build/inline/lockbench build/outline/lockbench build/syscalls build/forkexec build/tlbflush

# The bundled workloads' own programs (examples/workloads/): static, so a guest needs no libraries.
build/forkexec: workloads/forkexec.c
	mkdir -p build
	$(CC) -O2 -g -static -Wall -o $@ $<

build/tlbflush: workloads/tlbflush.c
	mkdir -p build
	$(CC) -O2 -g -static -pthread -Wall -o $@ $<

build/syscalls: workloads/syscalls.c
	mkdir -p build
	$(CC) -O2 -g -o $@ $<

build/lockbench.c: workloads/gen_lockbench.py
	mkdir -p build
	$(PYTHON) workloads/gen_lockbench.py $(SITES) > $@

# Each side compiled once to an object; the programs are linked from it, and so are the cachegrind
# demo's layout builds (examples/cachegrind.toml links each with a seeded pad first).
build/inline/lockbench.o: build/lockbench.c
	mkdir -p build/inline
	$(CC) -O2 -g -c -o $@ $<

build/outline/lockbench.o: build/lockbench.c
	mkdir -p build/outline
	$(CC) -O2 -g -DUNLOCK_OUTLINE -c -o $@ $<

build/%/lockbench: build/%/lockbench.o
	$(CC) -o $@ $<

# The compiled DWARF reader used by `perfab size` (Rust: gimli + object, through PyO3).
NATIVE_STAMP := $(VENV)/.native
native: $(NATIVE_STAMP)

$(NATIVE_STAMP): $(STAMP) $(wildcard native/src/*.rs) native/Cargo.toml native/Cargo.lock native/pyproject.toml
	$(PY) -m pip install -q ./native
	touch $@

# The QEMU TCG plugin counting guest instructions, simulated cache misses, branches and coherence
# between the workload's markers (see native/tcg/perfab_tcg.c for its arguments).
tcg-plugin: build/perfab_tcg.so

build/perfab_tcg.so: $(wildcard native/tcg/*.c native/tcg/*.h)
	mkdir -p build
	$(CC) -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -o $@ $(wildcard native/tcg/*.c)

clean:
	rm -rf build $(VENV) .perfab
