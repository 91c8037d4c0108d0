"""Records the guest's /proc/interrupts and /proc/vmstat around a workload: python capture.py OUTDIR (a static loop binary at /tmp/eng/loop)."""
from perfab.kernel import qemu
import glob, pathlib, sys
out = pathlib.Path(sys.argv[1])
captured = {}
orig = qemu.parse_sections
def keep(blob):
    s = orig(blob); captured.update(s); return s
qemu.parse_sections = keep
r = qemu.boot(qemu.BootRequest(kernel=sorted(glob.glob('/boot/vmlinuz-*'))[-1], argv=('/tmp/eng/loop', '20000'), vcpus=2, accel='tcg', timeout_s=120))
assert r.failure is None, r.failure
for src, dst in (("irq0", "interrupts.before"), ("irq1", "interrupts.after"), ("vm0", "vmstat.before"), ("vm1", "vmstat.after")):
    (out / dst).write_bytes(captured[src])
