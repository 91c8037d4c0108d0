"""Reading Kconfig entries and .config files, on Debian's real 6.1 tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfab.kernel import config as kconfig


@pytest.fixture(scope="module")
def symbols(debian_tree: Path) -> kconfig.Kconfig:
    return kconfig.read_kconfig(debian_tree)


def test_entries_carry_their_dependencies_prompts_and_selects(symbols: kconfig.Kconfig):
    (pv,) = [e for e in symbols.entries["PARAVIRT_SPINLOCKS"] if e.where.startswith("arch/x86/")]
    assert "PARAVIRT && SMP" in pv.depends and "HYPERVISOR_GUEST" in pv.depends  # own line and enclosing `if`
    assert pv.kind == "bool" and pv.has_prompt
    (mp,) = symbols.entries["X86_MPPARSE"]
    assert mp.prompt_if == ("ACPI",)
    assert ("ACPI", "") in symbols.selected_by["PNP"]
    assert symbols.kind("CMDLINE") == "string" and symbols.kind("NR_CPUS") == "int"
    (qcom,) = symbols.entries["QCOM_SSC_BLOCK_BUS"]  # attributes indented like help text are still read
    assert qcom.depends == ("ARCH_QCOM",)


def test_help_text_is_not_read_as_attributes(tmp_path: Path):
    (tmp_path / "Kconfig").write_text(
        'config A\n\tbool "a"\n\tdepends on B\n\thelp\n\t  Text.\n\n\t  depends on C, says the help\n'
        '\t  select D\nconfig E\n\tbool\n')
    symbols = kconfig.read_kconfig(tmp_path)
    assert symbols.entries["A"][0].depends == ("B",) and "D" not in symbols.selected_by
    assert symbols.entries["E"][0].has_prompt is False


@pytest.mark.parametrize("expr, expected", [
    ("PARAVIRT && SMP", 0), ("SMP", 2), ("!PARAVIRT", 2), ("PARAVIRT || SMP", 2), ("MODULES", 0),
    ("NR_CPUS >= 4", 2), ("NR_CPUS > 8", 0), ('CMDLINE = "quiet"', 2), ("SERIAL_8250=y", 2),
    ("(SMP && !PARAVIRT) || X86_32", 2), ("SMP && (X86_32 || PARAVIRT)", 0),
])
def test_expressions_in_tristate_logic(expr: str, expected: int):
    values = {"SMP": "y", "PARAVIRT": "n", "NR_CPUS": "8", "CMDLINE": "quiet", "SERIAL_8250": "y"}
    assert kconfig.evaluate(expr, values) == expected


def test_options_written_over_a_config_and_read_back(tmp_path: Path, symbols: kconfig.Kconfig):
    path = tmp_path / ".config"
    path.write_text("CONFIG_SMP=y\n# CONFIG_PARAVIRT is not set\nCONFIG_CMDLINE=\"\"\nCONFIG_NR_CPUS=2\n")
    options = kconfig.normalise({"CONFIG_SMP": False, "PARAVIRT": "y", "CMDLINE": 'a "b"', "NR_CPUS": 8})
    kconfig.write_options(path, options, symbols)
    text = path.read_text()
    assert "# CONFIG_SMP is not set" in text and "CONFIG_SMP=y" not in text
    assert 'CONFIG_CMDLINE="a \\"b\\""' in text and text.count("CONFIG_NR_CPUS") == 1
    assert kconfig.read_config(path) == {"SMP": "n", "PARAVIRT": "y", "CMDLINE": 'a "b"', "NR_CPUS": "8"}
