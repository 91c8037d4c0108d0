"""Kernels on the sides of an experiment.

A side may name a Linux kernel instead of (or as well as) a user-space
build: built from a tree, a git ref, a config and patches
(``perfab.kernel.build``), or given prebuilt.  Each run of such a side boots
the side's kernel under QEMU with a perfab-built initramfs, runs the
workload inside and powers the guest off (``perfab.kernel.qemu``); under TCG
a perfab-owned plugin counts the guest's instructions and simulated cache
misses, split user/kernel, over the workload alone (``perfab.kernel.tcg``).
"""
