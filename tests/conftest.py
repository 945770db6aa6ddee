from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Compiled databases and ISA censuses go to a cache of the test session, not the user's."""
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def names_function(path: str | Path, name: str) -> bool:
    """Whether this machine can name `name` in the ELF file `path`: its .symtab/.dynsym, or its
    separate debug file under /usr/lib/debug/.build-id (Debian's libc6-dbg, say). Read with
    pyelftools, not crashlens. System libraries are stripped on many distributions (Ubuntu's
    libc and python3.12 are): a test asserts a static function's name only where it can be had."""
    from elftools.elf.elffile import ELFFile

    def names(p: Path) -> tuple[set[str], str | None]:
        try:
            with open(p, "rb") as fh:
                elf = ELFFile(fh)
                found = {s.name for sec in (elf.get_section_by_name(".symtab"), elf.get_section_by_name(".dynsym"))
                         if sec is not None for s in sec.iter_symbols()}
                bid = None
                for sec in elf.iter_sections():
                    if sec.header.sh_type == "SHT_NOTE":
                        for note in sec.iter_notes():
                            if note["n_type"] == "NT_GNU_BUILD_ID":
                                desc = note["n_desc"]   # hex text, or bytes in some pyelftools releases
                                bid = desc.hex() if isinstance(desc, bytes) else str(desc)
                return found, bid
        except (OSError, Exception):  # noqa: BLE001 - unreadable: cannot name anything
            return set(), None

    found, bid = names(Path(path))
    if name in found:
        return True
    if bid:
        debug = Path("/usr/lib/debug/.build-id") / bid[:2] / f"{bid[2:]}.debug"
        return name in names(debug)[0]
    return False


def pages_touched(fn):
    """(result of fn(), page faults it took): how much of a memory-mapped file a call touched,
    counted by the kernel (getrusage minor + major faults), whatever the machine's speed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF)
    result = fn()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return result, (after.ru_minflt - before.ru_minflt) + (after.ru_majflt - before.ru_majflt)


def bytes_read(fn):
    """(result of fn(), bytes this process read with read(2) during it: /proc/self/io rchar)."""
    def rchar() -> int:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        raise OSError("no rchar in /proc/self/io")

    before = rchar()
    result = fn()
    return result, rchar() - before


def without_privilege() -> list[str] | None:
    """A command prefix under which permission checks apply, or None where none exists: nothing
    for an ordinary user; for root, setpriv with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of
    the bounding set (root then obeys a file's mode bits like its owner). Tests of unreadable
    files run the same on both instead of skipping as root."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        return None   # a container that forbids changing the bounding set
    return prefix
