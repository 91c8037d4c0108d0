"""``perfab size OLD NEW``: the command line over ``perfab.size.diff_files``.

Its errors and warnings speak as ``perfab size: ...``, one line each: a
file name may hold a line break, and it is shown as ``\\n``.
"""

from __future__ import annotations

from perfab.commands.base import Command
from perfab.errors import UsageError

DESCRIPTION = (
    "Symbol-level code-size diff of two ELF files. Prints bloat-o-meter's table, size(1)-like totals, "
    "function families (foo, foo.cold, foo.isra.N, __pfx_foo, ...) with a cause per row, and an accounting "
    "of every changed section. With DWARF (-g) on both sides, causes name inlining."
)


class Size(Command):
    name = "size"
    help = "code-size diff of two ELF files, explained"
    description = DESCRIPTION

    def add_arguments(self, p) -> None:
        only = p.add_mutually_exclusive_group()
        only.add_argument("-c", dest="mode", action="store_const", const="categories",
                          help="three tables: functions, data, rodata")
        only.add_argument("-d", dest="mode", action="store_const", const="data+rodata",
                          help="data and rodata symbols only")
        only.add_argument("-t", dest="mode", action="store_const", const="text", help="function symbols only")
        p.add_argument("-p", dest="prefix", metavar="PREFIX",
                       help="accepted for bloat-o-meter compatibility; ignored (nm is not run)")
        p.add_argument("--compat", action="store_true",
                       help="bloat-o-meter's symbol rules and output exactly (nm types, .NUMBER merged)")
        p.add_argument("--no-dwarf", action="store_true",
                       help="do not read DWARF: causes from symbols alone (faster)")
        p.add_argument("--format", choices=("text", "json", "markdown", "html"), default="text",
                       help="report format (default text); html: one self-contained page of sortable tables")
        p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
        p.add_argument("--allow-mismatch", action="store_true",
                       help="diff files of another ELF class (32/64-bit) or byte order anyway (refused by default)")
        p.add_argument("--limit", type=int, default=None, metavar="N",
                       help="rows per listing, largest |delta| kept, the rest summed (default 50; 0: all; "
                            "compat: all)")
        p.add_argument("old", metavar="OLD", help="the baseline ELF file (vmlinux, .so, executable, .o)")
        p.add_argument("new", metavar="NEW", help="the changed ELF file")

    def run(self, args, stdout, stderr) -> int:
        limit = args.limit if args.limit is not None else (0 if args.compat else 50)
        if limit < 0:
            raise UsageError("--limit must be >= 0 (0 prints every row)")
        if args.output is not None:
            from perfab.outputs import refuse_input  # imported on use: tempfile is not free

            refuse_input(args.output, {args.old: "OLD file", args.new: "NEW file"})
        text, mismatch = _report(args, limit)
        if mismatch:
            stderr.write(f"perfab size: warning: {_one_line(mismatch)}\n")
        if args.output is None:
            stdout.write(text)
            return 0
        from perfab.outputs import write_atomic

        write_atomic(args.output, text)
        return 0

    def error_line(self, error) -> str:
        return f"perfab size: {_one_line(str(error))}"

    def interrupted_line(self, args) -> str:
        return "perfab size: interrupted"


def _report(args, limit: int) -> tuple[str, str | None]:
    """(the report's text, how the targets differ or None); raises PerfabError.

    bloat-o-meter's own text (``--compat``, all rows) comes from the compiled
    symbol reader when it can answer (``quick``), without loading numpy.
    """
    mode = args.mode or "all"
    if args.compat and args.format == "text" and limit == 0:
        from perfab.size.quick import compat_text

        quick = compat_text(args.old, args.new, mode, args.allow_mismatch)
        if quick is not None:
            return quick
    from perfab.size.diff import diff_files  # imported on use: --help and usage errors stay light
    from perfab.size.report import render

    diff = diff_files(args.old, args.new, compat=args.compat, mode=mode, dwarf=not args.no_dwarf,
                      allow_mismatch=args.allow_mismatch)
    if args.format == "html":
        from perfab.report.html.size import render_size_html

        return render_size_html(diff, limit), diff.mismatch
    return render(diff, args.format, limit), diff.mismatch


def _one_line(text: str) -> str:
    """``text`` with line breaks shown as ``\\n`` (a file name may hold one), so an error stays one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
