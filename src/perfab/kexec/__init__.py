"""Kexec sides: this machine runs each side's kernel, switched by kexec where the session's plan switches side.

The modules, in the order a session meets them: ``checks`` (what must hold
before a switch, one line each), ``identity`` (which kernel runs, which an
image is), ``boots`` (the plan cut into boots, each boot's command line),
``state`` (what survives a reboot), ``machine`` (load and boot a kernel: the
seam tests replace), ``driver`` (begin, and proceed after each boot), ``context``
(the driver's context on this machine: the real machine and runner) and ``unit``
(the systemd unit that runs ``perfab kexec resume`` at boot).  The command
line is ``perfab.commands.kexec``.
"""
