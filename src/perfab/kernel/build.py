"""Kernels built for a side: checked, configured, built out of tree and cached.

``build_kernel(request, cache_root, say)`` turns a ``KernelRequest`` into a
``KernelArtifacts`` (bzImage, vmlinux, System.map, .config, build log):

1. name the source (``perfab.kernel.source``) and the compiler;
2. if these inputs built before, return that entry: no make runs;
3. otherwise, in a scratch directory: copy and patch the source if the side
   has patches, check every option against the tree's Kconfig files, write
   the base config and the options, run ``make olddefconfig`` and check that
   every option survived (``perfab.kernel.config``);
4. key the build by the source identity, the resolved ``.config``, the
   patches' contents and the compiler's ``--version`` line; an entry under
   that key is reused;
5. ``make O=<slot>/obj bzImage`` in the source's build slot (``perfab.kernel.slot``:
   the same paths for every build, so ccache, when installed, and a kept object
   tree of the same config save what they can), saying every so often how many
   files are compiled of how many (``perfab.kernel.progress``); then rename the
   artifacts and the log into ``<cache>/kernels/<key>/`` in one step.

Bad input is a ``UsageError`` of one line before make builds anything: no
source, an unknown or dropped option, a patch that does not apply.  A build
that fails is a ``KernelBuildError`` quoting the first error line and the
log kept under ``<cache>/failed/<key>/``.  A lock per key (``flock``) makes
a second process wait for the first one's build and then reuse it; an
entry is never rebuilt in place.  ``check_kernel`` runs steps 1-4 alone, so
every side can be checked before any side is built.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from perfab.errors import UsageError
from perfab.kernel import config as kconfig
from perfab.kernel import slot as kslot
from perfab.kernel import source as ksource
from perfab.kernel.progress import MakeProgress

DEFAULT_CACHE = Path(".perfab") / "kernel"
BASES = ("tinyconfig", "defconfig")
RECIPE = "perfab-kernel-1"  # changes when the way perfab builds changes, so old entries are not reused
_TOOLS = {"make": "make", "flex": "flex", "bison": "bison", "bc": "bc", "cpio": "cpio"}
_HEADERS = {"/usr/include/gelf.h": "libelf-dev", "/usr/include/openssl/ssl.h": "libssl-dev"}


class KernelBuildError(UsageError):
    """``make`` failed on a side's kernel; the message quotes the first error and names the log."""


@dataclass(frozen=True)
class KernelRequest:
    """One side's kernel: where its source comes from and how it is configured and built."""

    source: str | None = None  # a kernel tree, a tarball or (with ref) a git repository; None: Debian's 6.1 tarball
    ref: str | None = None  # a git ref (branch, tag, commit) of the repository at `source`
    base: str = "tinyconfig"  # "tinyconfig", "defconfig" or the path of a .config file
    options: tuple[tuple[str, str], ...] = ()  # Kconfig options over the base; a dict is accepted and kept sorted
    patches: tuple[str, ...] = ()  # patch files, applied in order to a private copy of the source
    cc: str = "gcc"  # the compiler, passed as make CC=
    jobs: int | None = None  # make -j; None: every CPU

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "options", kconfig.normalise(self.options))
        except ValueError as e:
            raise UsageError(f"{e}; write options as NAME = \"value\", e.g. SMP = \"y\"") from None
        object.__setattr__(self, "patches", tuple(str(p) for p in self.patches))


@dataclass(frozen=True)
class KernelArtifacts:
    """A built kernel in the cache; paths stay valid as long as the cache does."""

    bzimage: Path  # the bootable image (qemu -kernel)
    vmlinux: Path  # the ELF image, for symbols and `perfab size`
    system_map: Path  # the symbol table
    config: Path  # the resolved .config it was built from
    log: Path  # the build's log (configuration and make)
    key: str  # the cache key: source, resolved config, patches, compiler
    cached: bool  # True when this call built nothing
    source: str  # the source identity (tar:<sha256>:<size>, git:<commit> or tree:<sha256>)
    build_s: float  # wall seconds make took when this entry was built


@dataclass(frozen=True)
class KernelPlan:
    """What ``check_kernel`` found: the key the request builds under and whether it is built."""

    key: str  # the cache key
    cached: bool  # an entry under this key exists: building it will run no make
    source: str  # the source identity


@dataclass(frozen=True)
class _Inputs:
    """Everything a build depends on that can be named without configuring the tree."""

    source: str  # source identity
    cc_version: str  # first line of `cc --version`
    patches: tuple[str, ...]  # sha256 of each patch file, in order
    digest: str  # hash of the whole request, to find the key without running make


def check_kernel(request: KernelRequest, cache_root: Path = DEFAULT_CACHE, say=print) -> KernelPlan:
    """Check a request (source, options, patches) and compute its key; builds nothing."""
    cache_root = Path(cache_root).resolve()
    inputs = _inputs(request, cache_root)
    key = _remembered(cache_root, inputs.digest)
    if key is None:
        with ksource.scratch(cache_root, "check-") as work:
            _tree, key = _prepare(request, inputs, cache_root, work, say)
        _remember(cache_root, inputs.digest, key)
    return KernelPlan(key, _entry(cache_root, key) is not None, inputs.source)


def build_kernel(request: KernelRequest, cache_root: Path = DEFAULT_CACHE, say=print) -> KernelArtifacts:
    """The request's kernel, from the cache when it built before, else checked, built and published."""
    cache_root = Path(cache_root).resolve()
    ksource.sweep(cache_root)
    inputs = _inputs(request, cache_root)
    key = _remembered(cache_root, inputs.digest)
    if key is not None and _entry(cache_root, key) is not None:
        say(f"kernel {key[:12]}: built before; not rebuilt")
        return _artifacts(cache_root, key, cached=True)
    with ksource.scratch(cache_root, "build-") as work:
        _tree, key = _prepare(request, inputs, cache_root, work, say)
        with ksource.locked(cache_root / "locks" / f"{key}.lock"):
            cached = _entry(cache_root, key) is not None
            if not cached:
                _build(request, work, key, inputs, cache_root, say)
    _remember(cache_root, inputs.digest, key)
    return _artifacts(cache_root, key, cached=cached)


def _inputs(request: KernelRequest, cache_root: Path) -> _Inputs:
    """Name the source, base, patches and compiler; a missing one is a one-line error."""
    _check_tools(request.cc)
    identity = ksource.identify(request.source, request.ref, cache_root)
    cc_version = _version(request.cc)
    base = request.base
    if base not in BASES:
        path = Path(base).expanduser()
        if not path.is_file():
            raise UsageError(f"kernel base config {base!r} is neither {' nor '.join(BASES)} nor a file; "
                             "give one of those or the path of a .config")
        base = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    patches = _patch_digests(request.patches)
    parts = [RECIPE, identity, base, _options(request), patches, cc_version, _version("ld")]
    return _Inputs(identity, cc_version, tuple(patches), hashlib.sha256(json.dumps(parts).encode()).hexdigest())


def _check_tools(cc: str) -> None:
    if shutil.which(cc) is None:
        raise UsageError(f"compiler {cc!r} not found; install it or set the kernel's cc")
    missing = [pkg for tool, pkg in _TOOLS.items() if shutil.which(tool) is None]
    missing += [pkg for header, pkg in _HEADERS.items() if not Path(header).exists()]
    if missing:
        raise UsageError(f"kernel build tools missing: {', '.join(missing)}; run `make kernel-deps` "
                         f"(apt-get install {' '.join(missing)})")


def _version(tool: str) -> str:
    done = subprocess.run([tool, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return (done.stdout.strip().splitlines() or [f"{tool} (version unknown)"])[0]


def _patch_digests(patches: tuple[str, ...]) -> list[str]:
    out = []
    for p in patches:
        path = Path(p).expanduser()
        if not path.is_file():
            raise UsageError(f"kernel patch {p} not found; check the path (relative paths are from the "
                             "current directory)")
        out.append(hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def _remembered(cache_root: Path, digest: str) -> str | None:
    try:
        return json.loads((cache_root / "requests" / f"{digest}.json").read_text())["key"]
    except (OSError, ValueError, KeyError):
        return None


def _remember(cache_root: Path, digest: str, key: str) -> None:
    path = cache_root / "requests" / f"{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"key": key}) + "\n")
    tmp.replace(path)


def _entry(cache_root: Path, key: str) -> Path | None:
    where = cache_root / "kernels" / key
    return where if (where / "meta.json").is_file() else None


def _prepare(request: KernelRequest, inputs: _Inputs, cache_root: Path, work: Path, say) -> tuple[Path, str]:
    """Patch (a private copy), check and configure the tree in ``work``; returns the tree and the key."""
    tree = ksource.tree_for(request.source, inputs.source, cache_root, say)
    if request.patches:
        say(f"applying {len(request.patches)} patch(es) to a private copy of the kernel source")
        tree = ksource.private_copy(tree, work / "src")
        ksource.apply_patches(tree, request.patches)
    symbols = kconfig.read_kconfig(tree)
    options = _options(request)
    unknown = kconfig.unknown(options, symbols)
    if unknown:
        raise UsageError(_unknown_message(unknown, request, symbols))
    if bad := kconfig.bad_values(request.options, symbols):
        raise UsageError(f"kernel option {'; '.join(bad)}; fix the value in variant.kernel.config")
    obj = work / "obj"
    obj.mkdir()
    say(f"configuring the kernel ({request.base} + {len(options)} options, make olddefconfig)")
    _configure(request, tree, obj, options, symbols, work / "build.log", cache_root, inputs, say)
    parts = [RECIPE, inputs.source, (obj / ".config").read_text(), list(inputs.patches), inputs.cc_version]
    return tree, hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def _options(request: KernelRequest) -> tuple[tuple[str, str], ...]:
    """The request's options, over perfab's boot options when the base is tinyconfig."""
    merged = dict(kconfig.GUEST_OPTIONS) if request.base == "tinyconfig" else {}
    merged.update(dict(request.options))
    return kconfig.normalise(merged)


def _describe(request: KernelRequest) -> str:
    """The source as the user named it."""
    where = request.source or str(ksource.DEBIAN_TARBALL)
    return f"{where} at {request.ref}" if request.ref else where


def _unknown_message(names: list[str], request: KernelRequest, symbols: kconfig.Kconfig) -> str:
    ours = [n for n in names if n in kconfig.BOOT_OPTIONS and n not in dict(request.options)]
    if request.base == "tinyconfig" and len(ours) * 2 > len(kconfig.BOOT_OPTIONS):
        return (f"{_describe(request)} is not a Linux kernel source for x86: its Kconfig files define none of "
                f"{', '.join(ours[:4])} ... ({len(ours)} of the {len(kconfig.BOOT_OPTIONS)} options every x86 Linux "
                "has and perfab sets to boot a guest); give a Linux tree, tarball or git repository as source")
    hints = []
    for n in names:
        close = difflib.get_close_matches(n, symbols.entries.keys(), n=1)
        ours = "" if n in dict(request.options) else " (perfab adds it to tinyconfig to boot)"
        hints.append(f"{n}{ours}" + (f" (did you mean {close[0]}?)" if close else ""))
    verb = "does" if len(names) == 1 else "do"
    return (f"kernel option {', '.join(hints)} {verb} not exist in any Kconfig of {_describe(request)} (no `config "
            f"{names[0]}`); fix the name or drop it")


def _configure(request: KernelRequest, tree: Path, obj: Path, options, symbols: kconfig.Kconfig, log: Path,
               cache_root: Path, inputs: _Inputs, say) -> None:
    """Base config, the options over it, ``make olddefconfig``; every option must come out as asked.

    An unpatched tree is configured in a directory kept per source and
    compiler (Kconfig's own tools are compiled there once, so a later check
    takes a second or two); a patched one in ``obj``.  The resolved
    ``.config`` ends up in ``obj`` either way.
    """
    where = obj if request.patches else _config_dir(cache_root, inputs)
    with ksource.locked(where.parent / f"{where.name}.lock"):
        where.mkdir(parents=True, exist_ok=True)
        if request.base in BASES:
            _base_config(request, tree, where, where != obj, log, cache_root, inputs)
        else:
            shutil.copyfile(Path(request.base).expanduser(), where / ".config")
        kconfig.write_options(where / ".config", options, symbols)
        _config_step(request, tree, where, "olddefconfig", log, cache_root, inputs)
        if where != obj:
            shutil.copyfile(where / ".config", obj / ".config")
    resolved = kconfig.read_config(obj / ".config")
    asked = dict(request.options)
    for note in kconfig.changes(tuple(o for o in options if o[0] not in asked), resolved, symbols):
        say(f"note: {note} (perfab adds it to tinyconfig for the guest)")
    changed = kconfig.changes(request.options, resolved, symbols)
    if changed:
        raise UsageError(f"kernel config not as asked: {'; '.join(changed)}; set what they need too, or drop them")


def _base_config(request: KernelRequest, tree: Path, where: Path, keep: bool, log: Path, cache_root: Path,
                 inputs: _Inputs) -> None:
    """``make tinyconfig``/``defconfig`` into ``where/.config``; kept beside it when ``keep`` and reused."""
    kept = where / f"{request.base}.base"
    if keep and kept.is_file():
        shutil.copyfile(kept, where / ".config")
        return
    _config_step(request, tree, where, request.base, log, cache_root, inputs)
    if keep:
        shutil.copyfile(where / ".config", kept)


def _config_dir(cache_root: Path, inputs: _Inputs) -> Path:
    """The directory an unpatched source is configured in, per source and compiler."""
    name = hashlib.sha256(f"{RECIPE}\0{inputs.source}\0{inputs.cc_version}".encode()).hexdigest()[:20]
    return cache_root / "sources" / "configure" / name


def _config_step(request, tree: Path, obj: Path, target: str, log: Path, cache_root: Path, inputs: _Inputs) -> None:
    if _make(request, tree, obj, [target], log, jobs=1) != 0:
        kept = _keep_failed(cache_root, inputs.digest[:24], log)
        raise KernelBuildError(f"kernel `make {target}` failed: {_first_error(kept)}; full log: {kept}")


def _make(request: KernelRequest, tree: Path, obj: Path, targets: list[str], log: Path,
          jobs: int | None = None, progress: MakeProgress | None = None) -> int:
    """``make O=obj`` in ``tree``, appending to ``log``; the environment is pinned for reproducible output.

    With ``progress``, make's output is read as it comes and fed to it; returns make's exit status."""
    jobs = jobs or request.jobs or os.cpu_count() or 1
    argv = ["make", "-C", str(tree), f"O={obj}", "ARCH=x86_64", f"CC={_compiler(request.cc)}", f"-j{jobs}",
            *targets]
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARCH", "CROSS_COMPILE", "KBUILD_OUTPUT", "KCONFIG_CONFIG",
                        "LOCALVERSION", "CC", "CFLAGS")}
    env.update(LC_ALL="C", KBUILD_BUILD_TIMESTAMP="1970-01-01", KBUILD_BUILD_USER="perfab",
               KBUILD_BUILD_HOST="perfab", KBUILD_BUILD_VERSION="1", GIT_CEILING_DIRECTORIES=str(tree.parent))
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        if progress is None:
            return subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL).returncode
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL) as proc:
            for line in proc.stdout:
                out.write(line)
                progress.feed(line)
            return proc.wait()


def _compiler(cc: str) -> str:
    """``cc`` behind ccache when ccache is installed (and ``PERFAB_CCACHE`` is not ``0``): the build
    slot's stable paths let ccache's preprocessor mode hit for every file a config change leaves alone."""
    if os.environ.get("PERFAB_CCACHE", "1") != "0" and shutil.which("ccache"):
        return f"ccache {cc}"
    return cc


def _build(request: KernelRequest, work: Path, key: str, inputs: _Inputs, cache_root: Path, say) -> None:
    """``make bzImage`` in the source's build slot, then move the artifacts into ``<cache>/kernels/<key>``."""
    pristine = ksource.tree_for(request.source, inputs.source, cache_root, say)
    log = work / "build.log"
    with kslot.build_slot(cache_root, inputs.source) as where:
        slot = kslot.fill(where, pristine, request.patches, work / "obj" / ".config", cache_root)
        start = f", from the object tree of {slot.reused[:12]}" if slot.reused else ""
        say(f"building kernel {key[:12]} with {_compiler(request.cc)}, -j{request.jobs or os.cpu_count()}{start} "
            f"(log: {log})")
        progress = MakeProgress(f"kernel {key[:12]}", say, None if slot.reused else _expected(cache_root, request))
        done = _make(request, slot.src, slot.obj, ["bzImage"], log, progress=progress)
        if done != 0:
            kept = _keep_failed(cache_root, key, log)
            raise KernelBuildError(f"kernel build failed: {_first_error(kept)}; full log: {kept}; fix the source, "
                                   "patches or options")
        build_s = time.monotonic() - progress.started
        _publish(slot, work, key, inputs, request, cache_root, build_s, progress.compiled)
        kslot.keep(slot, key, request.patches, cache_root)
    say(f"kernel {key[:12]} built in {build_s:.0f} s ({progress.compiled:,} files compiled{start})")


def _publish(slot: kslot.Slot, work: Path, key: str, inputs: _Inputs, request: KernelRequest, cache_root: Path,
             build_s: float, compiled: int) -> None:
    """Move the artifacts and the log into ``<cache>/kernels/<key>`` in one rename."""
    out = work / "out"
    out.mkdir()
    for src, name in (("arch/x86/boot/bzImage", "bzImage"), ("vmlinux", "vmlinux"), ("System.map", "System.map")):
        shutil.copyfile(slot.obj / src, out / name)
    shutil.copyfile(slot.obj / ".config", out / "config")
    (work / "build.log").rename(out / "build.log")
    meta = {"key": key, "source": inputs.source, "request": asdict(request), "cc_version": inputs.cc_version,
            "patches": list(inputs.patches), "build_s": round(build_s, 3), "built_at": time.time(),
            "compiled": compiled, "from_objtree": slot.reused}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (cache_root / "kernels").mkdir(parents=True, exist_ok=True)
    out.rename(cache_root / "kernels" / key)


def _expected(cache_root: Path, request: KernelRequest) -> int | None:
    """Files a clean build of this base compiled last time (the cache's newest such entry), else None."""
    best, when = None, -1.0
    for meta_path in (cache_root / "kernels").glob("*/meta.json"):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if (meta.get("compiled") and not meta.get("from_objtree")
                and meta.get("request", {}).get("base") == request.base and meta.get("built_at", 0) > when):
            best, when = meta["compiled"], meta.get("built_at", 0)
    return best


def _keep_failed(cache_root: Path, name: str, log: Path) -> Path:
    """Keep a failed step's log under ``<cache>/failed/<name>/`` (the scratch directory goes away)."""
    where = cache_root / "failed" / name
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, where / "build.log")
    return where / "build.log"


def _first_error(log: Path) -> str:
    """The first line of a log that names an error: the compiler's, else make's."""
    lines = log.read_text(errors="replace").splitlines()
    for pattern in (r"\berror\b:", r"\*\*\*|Error \d+|not found|No rule"):
        for line in lines:
            if re.search(pattern, line, re.IGNORECASE) and not line.startswith("$ make"):
                return line.strip()[:200]
    return (lines or ["no output"])[-1].strip()[:200]


def _artifacts(cache_root: Path, key: str, cached: bool) -> KernelArtifacts:
    where = cache_root / "kernels" / key
    meta = json.loads((where / "meta.json").read_text())
    return KernelArtifacts(where / "bzImage", where / "vmlinux", where / "System.map", where / "config",
                           where / "build.log", key, cached, meta["source"], meta["build_s"])
