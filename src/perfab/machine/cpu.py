"""The processor: model, topology and cache geometry, read from procfs and sysfs.

Cache geometry follows ``lscpu -C`` (util-linux): one entry per cache of
CPU 0, named ``L1d``, ``L1i``, ``L2``, ``L3``; sizes in binary units with
one decimal ("1M", "27.5M"); ALL-SIZE is the size times the number of
distinct instances (distinct ``shared_cpu_list``) among the online CPUs.
It is read from ``/sys/devices/system/cpu/cpu*/cache/index*`` so lscpu
need not be installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from perfab.machine.sysfs import UNKNOWN, is_missing, online_cpus, read_line, read_text, under

_CPU = "/sys/devices/system/cpu"
_TYPE_SUFFIX = {"Data": "d", "Instruction": "i", "Unified": ""}
_MODEL_KEYS = ("model name", "cpu model", "cpu", "Processor", "uarch")


@dataclass(frozen=True)
class Cache:
    """One cache level of CPU 0, as lscpu -C lists it."""

    name: str  # "L1d", "L1i", "L2", "L3"
    level: int  # 1, 2, 3
    type_: str  # "Data", "Instruction", "Unified"
    size_bytes: int  # one instance
    ways: int  # associativity; 0 = fully associative
    sets: int  # number of sets
    line_bytes: int  # coherency line size
    instances: int  # distinct instances among the online CPUs


def cpu_model(root: Path) -> str:
    """The CPU model string from /proc/cpuinfo (``model name`` on x86)."""
    text = read_text(under(root, "/proc/cpuinfo"))
    if is_missing(text):
        return text
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    for key in _MODEL_KEYS:
        if fields.get(key):
            return fields[key]
    return UNKNOWN


def topology(root: Path) -> dict[str, str]:
    """Sockets, physical cores and hardware threads among the online CPUs."""
    cpus = online_cpus(root)
    packages: set[str] = set()
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        base = f"{_CPU}/cpu{cpu}/topology"
        package = read_line(under(root, f"{base}/physical_package_id"))
        core = read_line(under(root, f"{base}/core_id"))
        if is_missing(package) or is_missing(core):
            return {"cpu.sockets": UNKNOWN, "cpu.cores": UNKNOWN, "cpu.threads": str(len(cpus))}
        packages.add(package)
        cores.add((package, core))
    if not cpus:
        return {"cpu.sockets": UNKNOWN, "cpu.cores": UNKNOWN, "cpu.threads": UNKNOWN}
    return {"cpu.sockets": str(len(packages)), "cpu.cores": str(len(cores)), "cpu.threads": str(len(cpus))}


def caches(root: Path) -> list[Cache]:
    """CPU 0's caches, smallest level first; [] when sysfs has none."""
    base = under(root, f"{_CPU}/cpu0/cache")
    try:
        indexes = sorted(p.name for p in base.iterdir() if p.name.startswith("index"))
    except OSError:
        return []
    found = [c for c in (_read_cache(root, name) for name in indexes) if c is not None]
    return sorted(found, key=lambda c: (c.level, c.name))


def _read_cache(root: Path, index: str) -> Cache | None:
    def field(name: str, cpu: int = 0) -> str:
        return read_line(under(root, f"{_CPU}/cpu{cpu}/cache/{index}/{name}"))

    try:
        level, type_ = int(field("level")), field("type")
        size_bytes = parse_size(field("size"))
        ways, line = int(field("ways_of_associativity")), int(field("coherency_line_size"))
        sets = int(field("number_of_sets"))
    except ValueError:
        return None
    if type_ not in _TYPE_SUFFIX:
        return None
    shared = {field("shared_cpu_list", cpu) for cpu in online_cpus(root)}
    instances = len(shared - {""}) or 1
    name = f"L{level}{_TYPE_SUFFIX[type_]}"
    return Cache(name, level, type_, size_bytes, ways, sets, line, instances)


def parse_size(text: str) -> int:
    """Bytes in a sysfs cache size such as ``48K`` or ``32768K``; ValueError if not."""
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not match:
        raise ValueError(f"not a cache size: {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]
    return int(match.group(1)) * scale


def human_size(size_bytes: int) -> str:
    """A size the way lscpu prints it: binary units, one decimal, half rounded up."""
    exp = 0
    while exp < 60 and size_bytes >= 1 << (exp + 10):
        exp += 10
    unit = "BKMGTPE"[exp // 10]
    whole, rest = divmod(size_bytes, 1 << exp)
    tenths = (rest * 10 + (1 << exp) // 2) // (1 << exp) if exp else 0
    if tenths == 10:
        whole, tenths = whole + 1, 0
    return f"{whole}.{tenths}{unit}" if tenths else f"{whole}{unit}"


def cache_value(cache: Cache) -> str:
    """The snapshot value of one cache: ``48K 12-way 64B, 64 sets, 2 instances (96K)``."""
    ways = "fully-associative" if cache.ways == 0 else f"{cache.ways}-way"
    plural = "instance" if cache.instances == 1 else "instances"
    return (
        f"{human_size(cache.size_bytes)} {ways} {cache.line_bytes}B, {cache.sets} sets,"
        f" {cache.instances} {plural} ({human_size(cache.size_bytes * cache.instances)})"
    )


_VALUE = re.compile(
    r"(?P<size>[\d.]+[BKMGTPE]) (?P<ways>\d+-way|fully-associative) (?P<line>\d+)B,"
    r" (?P<sets>\d+) sets, \d+ instances? \((?P<all>[\d.]+[BKMGTPE])\)"
)


def cache_row(name: str, value: str) -> list[str] | None:
    """lscpu -C columns (NAME ONE-SIZE ALL-SIZE WAYS TYPE LEVEL SETS COHERENCY-SIZE)."""
    match = _VALUE.fullmatch(value)
    name_match = re.fullmatch(r"L(\d)([di]?)", name)
    if not match or not name_match:
        return None
    type_ = {"d": "Data", "i": "Instruction", "": "Unified"}[name_match.group(2)]
    ways = match["ways"].removesuffix("-way") if match["ways"][0].isdigit() else "0"
    level = name_match.group(1)
    return [name, match["size"], match["all"], ways, type_, level, match["sets"], match["line"]]
