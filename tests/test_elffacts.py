"""crashlens.binary.elffacts against readelf, on libraries built here with gcc and ld.

Every library is a real file made by the toolchain on this machine (no hand-written ELF);
each fact read_elf_facts reports is compared with what `readelf` prints for the same file.
The robustness tests take one such library and truncate or mutate it (headers, section
offsets and sizes, dynamic entries, string offsets, version chains, notes, hash tables):
read_elf_facts must return (with the damage in `errors`) or raise ElfError, and never loop.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tracemalloc
from pathlib import Path

import pytest

from crashlens.binary.elf import ElfError, ElfFile, iter_verneed, StringTable
from crashlens.binary.elffacts import DynamicSymbols, ElfFacts, read_elf_facts

from .conftest import pages_touched

GCC = shutil.which("gcc")
GXX = shutil.which("g++")
READELF = shutil.which("readelf")
LD = shutil.which("ld")

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")
needs_readelf = pytest.mark.skipif(READELF is None, reason="readelf (binutils) is not installed")

MATERIALS = Path(os.environ.get("CRASHLENS_MATERIALS", "/tmp/crashlens-materials")) / "lib"


# -- building ------------------------------------------------------------------------------------------
def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})


def _build(cwd: Path, cmd: list[str]) -> bool:
    r = _run(cmd, cwd)
    return r.returncode == 0


LIBVER_C = r"""
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
int bar(void) { return 3; }
int baz(void) { return 4; }
__asm__(".symver foo_v1,foo@MYLIB_1.0");
__asm__(".symver foo_v2,foo@@MYLIB_2.0");
"""
VER_MAP = """MYLIB_1.0 { global: foo; bar; use; wave; local: *; };
MYLIB_2.0 { global: foo; baz; } MYLIB_1.0;
"""
USER_C = r"""
#include <pthread.h>
#include <stdio.h>
extern int foo(void), bar(void), baz(void);
static void *run(void *p) { return p; }
int use(void) { pthread_t t; pthread_create(&t, 0, run, 0); printf("%d\n", foo()); return bar() + baz(); }
"""
CXX_CC = r"""
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
std::string make(int x) {
    std::ostringstream s; s << x;
    if (x < 0) throw std::runtime_error("negative");
    std::vector<std::string> v{s.str()};
    return v.at(0) + std::to_string(x);
}
"""
VEC_C = r"""
void axpy(float *restrict a, const float *restrict b, int n) { for (int i = 0; i < n; i++) a[i] += 2.0f * b[i]; }
"""
TLS_C = r"""
__thread int counter[64];
int bump(void) { return ++counter[3]; }
"""
MAIN_C = r"""
#include <stdio.h>
int main(void) { puts("hi"); return 0; }
"""
PLAIN_C = "int f(void) { return 42; }\n"
MATH_C = "#include <math.h>\ndouble wave(double x) { return cos(x) * sin(x); }\n"
PACKAGE_JSON = '{"type":"deb","name":"crashlens-test","version":"1.2.3","architecture":"amd64"}'


class Built:
    """The libraries of this module, built once; a name maps to a path, or is absent when the
    toolchain here cannot make it (the test that needs it then skips, saying why)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, Path] = {}
        self.why: dict[str, str] = {}

    def add(self, name: str, cmd: list[str], why: str) -> None:
        if _build(self.root, cmd):
            self.paths[name] = self.root / name
        else:
            self.why[name] = why

    def get(self, name: str) -> Path:
        if name not in self.paths:
            pytest.skip(self.why.get(name, f"{name} was not built"))
        return self.paths[name]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if GCC is None:
        pytest.skip("gcc is not installed")
    root = tmp_path_factory.mktemp("elffacts")
    for name, text in (("libver.c", LIBVER_C), ("ver.map", VER_MAP), ("user.c", USER_C), ("cxx.cc", CXX_CC),
                       ("vec.c", VEC_C), ("tls.c", TLS_C), ("main.c", MAIN_C), ("plain.c", PLAIN_C),
                       ("math.c", MATH_C)):
        (root / name).write_text(text)
    b = Built(root)
    so = [GCC, "-shared", "-fPIC", "-O2"]
    b.add("libver.so.1", so + ["libver.c", "-Wl,--version-script=ver.map", "-Wl,-soname,libver.so.1",
                               "-Wl,--build-id=sha1", "-o", "libver.so.1"], "gcc could not build a versioned library")
    b.add("librunpath.so", so + ["user.c", "-o", "librunpath.so", "-L.", "-l:libver.so.1", "-Wl,-soname,librunpath.so.7",
                                 "-Wl,-rpath,$ORIGIN/../lib:/opt/crashlens/lib", "-Wl,--enable-new-dtags",
                                 "-Wl,-z,noexecstack"], "gcc could not link against libver.so.1")
    b.add("librpath.so", so + ["user.c", "-o", "librpath.so", "-L.", "-l:libver.so.1",
                               "-Wl,-rpath,/opt/old/lib", "-Wl,--disable-new-dtags"], "gcc could not link with RPATH")
    if GXX:
        b.add("libcxx.so", [GXX, "-shared", "-fPIC", "-O2", "cxx.cc", "-o", "libcxx.so", "-Wl,-soname,libcxx.so"],
              "g++ could not build a C++ library")
    else:
        b.why["libcxx.so"] = "g++ is not installed"
    b.add("libexecstack.so", so + ["plain.c", "-o", "libexecstack.so", "-Wl,-z,execstack"], "ld lacks -z execstack")
    b.add("libbuildid.so", so + ["plain.c", "-o", "libbuildid.so", "-Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567"],
          "ld lacks --build-id=0xHEX")
    b.add("libpackage.so", so + ["plain.c", "-o", "libpackage.so", "-Xlinker", f"--package-metadata={PACKAGE_JSON}"],
          "this ld does not support --package-metadata (binutils >= 2.39)")
    b.add("libv3.so", so + ["plain.c", "-o", "libv3.so", "-Wl,-z,x86-64-v3"], "this ld does not support -z x86-64-v3")
    b.add("libneeded.so", so + ["-mavx2", "-mfma", "-mneeded", "vec.c", "-o", "libneeded.so"],
          "this gcc does not support -mneeded")
    # ISA_1_USED only survives when every input object has it: link the one object with ld alone
    if LD and _build(root, [GCC, "-O3", "-mavx2", "-mfma", "-fPIC", "-Wa,-mx86-used-note=yes", "-c", "vec.c", "-o", "vec.o"]):
        b.add("libused.so", [LD, "-shared", "-o", "libused.so", "vec.o", "-z", "x86-64-v2"],
              "this ld cannot link vec.o with -z x86-64-v2")
    else:
        b.why["libused.so"] = "this assembler does not support -mx86-used-note"
    b.add("libcet.so", so + ["-fcf-protection=full", "plain.c", "-o", "libcet.so", "-Wl,-z,ibt", "-Wl,-z,shstk"],
          "this toolchain does not support CET (-fcf-protection, -z ibt/shstk)")
    b.add("libtls.so", so + ["-ftls-model=initial-exec", "tls.c", "-o", "libtls.so"], "gcc could not build a TLS library")
    b.add("libsysv.so", so + ["libver.c", "-Wl,--version-script=ver.map", "-Wl,--hash-style=sysv", "-o", "libsysv.so"],
          "ld lacks --hash-style=sysv")
    b.add("libboth.so", so + ["user.c", "libver.c", "math.c", "-Wl,--version-script=ver.map", "-Wl,--hash-style=both",
                              "-Wl,-soname,libboth.so.3", "-Wl,-rpath,$ORIGIN", "-Wl,--build-id=sha1",
                              "-Xlinker", f"--package-metadata={PACKAGE_JSON}", "-o", "libboth.so", "-lm"],
          "could not build the robustness library")
    if "libboth.so" not in b.paths:  # an ld without --package-metadata: the same without the note
        b.add("libboth.so", so + ["user.c", "libver.c", "math.c", "-Wl,--version-script=ver.map",
                                  "-Wl,--hash-style=both", "-Wl,-soname,libboth.so.3", "-Wl,-rpath,$ORIGIN",
                                  "-Wl,--build-id=sha1", "-o", "libboth.so", "-lm"], "could not build the robustness library")
    b.add("prog", [GCC, "-O2", "main.c", "-o", "prog"], "gcc could not link an executable")
    b.add("plain.o", [GCC, "-O2", "-c", "plain.c", "-o", "plain.o"], "gcc could not compile an object")
    if LD and _build(root, [GCC, "-m32", "-fPIC", "-O2", "-c", "plain.c", "-o", "plain32.o"]):
        b.add("lib32.so", [LD, "-m", "elf_i386", "-shared", "-soname", "lib32.so.1", "--build-id", "-o", "lib32.so",
                           "plain32.o"], "ld cannot link elf_i386")
    else:
        b.why["lib32.so"] = "gcc cannot compile -m32 here"
    return b


# -- readelf, parsed ------------------------------------------------------------------------------------------
def readelf(path: Path | str, *opts: str) -> str:
    r = subprocess.run([READELF or "readelf", "-W", *opts, str(path)], capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"})
    return r.stdout


class Readelf:
    """The facts readelf prints for one file, in crashlens' terms."""

    def __init__(self, path: Path | str) -> None:
        header = readelf(path, "-h")
        self.elf_class = re.search(r"Class:\s+(ELF\d+)", header).group(1)
        self.endian = "little" if "little endian" in header else "big"
        self.type = re.search(r"Type:\s+(\w+)", header).group(1)
        dyn = readelf(path, "-d")
        self.needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dyn)
        self.soname = _first(r"\(SONAME\)\s+Library soname: \[(.*)\]", dyn)
        self.rpath = _first(r"\(RPATH\)\s+Library rpath: \[(.*)\]", dyn)
        self.runpath = _first(r"\(RUNPATH\)\s+Library runpath: \[(.*)\]", dyn)
        flags = _first(r"\(FLAGS\)\s+(.*)", dyn)
        self.dt_flags = tuple(flags.split()) if flags else ()
        flags1 = _first(r"\(FLAGS_1\)\s+Flags: (.*)", dyn)
        self.dt_flags_1 = tuple(flags1.split()) if flags1 else ()
        self.version_needs, self.version_defs = _parse_versions(readelf(path, "-V"))
        notes = readelf(path, "-n")
        self.build_id = _first(r"Build ID: ([0-9a-f]+)", notes)
        m = re.search(r"OS: (\w+), ABI: ([\d.]+)", notes)
        self.abi_tag = (m.group(1), m.group(2)) if m else None
        self.package = _first(r"Packaging Metadata: (.*)", notes)
        # with -W every property is on one line: "x86 ISA needed: a, b, x86 feature used: c, d"
        props: dict[str, tuple[str, ...]] = {}
        for line in re.findall(r"Properties: (.*)", notes):
            for item in re.split(r", (?=(?:x86 (?:ISA|feature)|AArch64 feature))", line.strip()):
                label, _, values = item.partition(": ")
                props[label] = _split_list(values)
        self.isa_needed = props.get("x86 ISA needed", ())
        self.isa_used = props.get("x86 ISA used", ())
        self.x86_features = props.get("x86 feature", ())
        self.features_used = props.get("x86 feature used", ())
        self.aarch64_features = props.get("AArch64 feature", ())
        self.has_properties = "NT_GNU_PROPERTY_TYPE_0" in notes
        phdrs = readelf(path, "-l")
        m = re.search(r"GNU_STACK\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+([RWE ]+?)\s+0x", phdrs)
        self.stack_flags = m.group(1).replace(" ", "") if m else None
        m = re.search(r"^\s*TLS\s+\S+\s+\S+\s+\S+\s+\S+\s+(0x[0-9a-f]+)", phdrs, re.M)
        self.tls_size = int(m.group(1), 16) if m else None
        self.interpreter = _first(r"\[Requesting program interpreter: (.*)\]", phdrs)
        syms = readelf(path, "--dyn-syms")
        m = re.search(r"Symbol table '\.dynsym' contains (\d+) entries", syms)
        self.dynsym_count = int(m.group(1)) if m else None
        self.symbols = _parse_symbols(syms)
        comment = readelf(path, "-p", ".comment")
        self.comment = re.findall(r"^\s*\[\s*[0-9a-f]+\]\s+(.*?)\s*$", comment, re.M)


def _first(rx: str, text: str) -> str | None:
    m = re.search(rx, text)
    return m.group(1) if m else None


def _split_list(text: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else ()


def _parse_versions(text: str) -> tuple[dict[str, list[tuple[str, bool]]], list[tuple[int, str, bool, list[str]]]]:
    needs: dict[str, list[tuple[str, bool]]] = {}
    defs: list[tuple[int, str, bool, list[str]]] = []
    section = None
    current: list[tuple[str, bool]] | None = None
    for line in text.splitlines():
        if line.startswith("Version needs section"):
            section = "needs"
        elif line.startswith("Version definition section"):
            section = "defs"
        elif line.startswith("Version symbols section"):
            section = None
        elif section == "needs":
            m = re.search(r"File: (\S+)\s+Cnt:", line)
            if m:
                current = needs.setdefault(m.group(1), [])
                continue
            m = re.search(r"Name: (\S+)\s+Flags: (\S+)", line)
            if m and current is not None:
                current.append((m.group(1), "WEAK" in m.group(2)))
        elif section == "defs":
            m = re.search(r"Flags: (\S+)\s+Index: (\d+)\s+Cnt: \d+\s+Name: (\S+)", line)
            if m:
                defs.append((int(m.group(2)), m.group(3), m.group(1) == "BASE", []))
                continue
            m = re.search(r"Parent \d+: (\S+)", line)
            if m and defs:
                defs[-1][3].append(m.group(1))
    return needs, defs


_SYM_LINE = re.compile(r"^\s*(\d+): ([0-9a-f]+)\s+(0x[0-9a-f]+|\d+) (\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?: (.*))?$")


def _parse_symbols(text: str) -> list[tuple[int, int, int, str, str, str, bool, str]]:
    out = []
    for line in text.splitlines():
        m = _SYM_LINE.match(line)
        if not m:
            continue
        num, value, size, typ, bind, vis, ndx, name = m.groups()
        name = re.sub(r" \(\d+\)$", "", name or "")
        out.append((int(num), int(value, 16), int(size, 0), typ, bind, vis, ndx != "UND", name))
    return out


def _max_version(versions: list[str], prefix: str) -> str | None:
    best = None
    for v in versions:
        m = re.fullmatch(prefix + r"_(\d+(?:\.\d+)*)", v)
        if m and (best is None or tuple(map(int, m.group(1).split("."))) > tuple(map(int, best.split(".")))):
            best = m.group(1)
    return best


def assert_matches_readelf(facts: ElfFacts, path: Path | str, symbols: bool = True) -> Readelf:
    """Every fact that readelf shows, compared."""
    r = Readelf(path)
    assert facts.errors == ()
    assert facts.elf_class == r.elf_class
    assert facts.endian == r.endian
    assert {"DYN": "shared-object", "EXEC": "executable", "REL": "relocatable", "CORE": "core"}[r.type] == facts.type
    assert list(facts.needed) == r.needed
    assert facts.soname == r.soname
    assert facts.rpath == r.rpath
    assert facts.runpath == r.runpath
    assert facts.dt_flags == r.dt_flags
    assert facts.dt_flags_1 == r.dt_flags_1
    assert {n: [(v.name, v.weak) for v in vs.versions] for n, vs in ((n.file, n) for n in facts.version_needs)} == r.version_needs
    assert facts.required_versions == {f: [v for v, _ in vs] for f, vs in r.version_needs.items()}
    assert [(d.index, d.name, d.base, list(d.parents)) for d in facts.version_defs] == r.version_defs
    every = [v for vs in r.version_needs.values() for v, weak in vs if not weak]
    for prefix in ("GLIBC", "GLIBCXX", "CXXABI", "GCC"):
        assert facts.max_versions.get(prefix) == _max_version(every, prefix), prefix
    assert facts.build_id == r.build_id
    assert (facts.abi_tag.os, facts.abi_tag.version) == r.abi_tag if facts.abi_tag else r.abi_tag is None
    assert facts.package_text == r.package
    if r.has_properties:
        p = facts.gnu_properties
        assert p is not None
        assert p.isa_needed == r.isa_needed
        assert p.isa_used == r.isa_used
        assert p.x86_features == r.x86_features
        assert p.features_used == r.features_used
        assert p.aarch64_features == r.aarch64_features
    else:
        assert facts.gnu_properties is None
    assert facts.stack_flags == r.stack_flags
    assert facts.tls_size == r.tls_size
    assert facts.interpreter == r.interpreter
    assert facts.dynsym_count == r.dynsym_count
    assert list(facts.comment) == list(dict.fromkeys(r.comment))
    json.dumps(facts.to_dict())
    if symbols and r.dynsym_count:
        mine = [(s.index, s.value, s.size, s.type, s.binding, s.visibility, s.defined, s) for s in facts.symbols()]
        theirs = r.symbols[1:]
        assert len(mine) == len(theirs)
        for m, t in zip(mine, theirs):
            assert m[:7] == t[:7], (m, t)
            if m[3] == "SECTION":       # readelf prints the section's name for a section symbol
                continue
            name = str(m[7])
            # readelf leaves out the version of a version's own definition symbol (MYLIB_1.0, ABS)
            assert name == t[7] or (m[7].name == t[7] and m[7].version == m[7].name), (name, t[7])
    return r


# -- facts against readelf --------------------------------------------------------------------------------------
pytestmark = needs_readelf


@pytest.mark.parametrize("name", ["libver.so.1", "librunpath.so", "librpath.so", "libcxx.so", "libexecstack.so",
                                  "libbuildid.so", "libpackage.so", "libv3.so", "libneeded.so", "libused.so",
                                  "libcet.so", "libtls.so", "libsysv.so", "libboth.so", "prog", "plain.o", "lib32.so"])
def test_every_fact_matches_readelf(built: Built, name: str) -> None:
    path = built.get(name)
    assert_matches_readelf(read_elf_facts(path), path)


def test_versions_defined_and_required(built: Built) -> None:
    lib = read_elf_facts(built.get("libver.so.1"))
    assert [(d.name, d.base, d.parents) for d in lib.version_defs] == [
        ("libver.so.1", True, ()), ("MYLIB_1.0", False, ()), ("MYLIB_2.0", False, ("MYLIB_1.0",))]
    assert lib.soname == "libver.so.1"
    assert len(lib.build_id) == 40                      # sha1
    user = read_elf_facts(built.get("librunpath.so"))
    req = user.required_versions
    assert sorted(req["libver.so.1"]) == ["MYLIB_1.0", "MYLIB_2.0"]
    assert "GLIBC_2.2.5" in req["libc.so.6"]
    assert user.max_versions["GLIBC"] == _max_version(req["libc.so.6"], "GLIBC")
    assert user.needed == ("libver.so.1", "libc.so.6")
    assert user.runpath == "$ORIGIN/../lib:/opt/crashlens/lib" and user.rpath is None
    assert user.soname == "librunpath.so.7"
    old = read_elf_facts(built.get("librpath.so"))
    assert old.rpath == "/opt/old/lib" and old.runpath is None


def test_symbol_helpers_explain_undefined_symbols(built: Built) -> None:
    lib = read_elf_facts(built.get("libver.so.1"))
    assert lib.defines("foo") and lib.defines("foo", "MYLIB_1.0") and lib.defines("foo", "MYLIB_2.0")
    assert lib.defines("bar", "MYLIB_1.0") and not lib.defines("bar", "MYLIB_2.0")
    assert not lib.defines("foo_v1")                   # local: not exported
    assert not lib.defines("nonexistent_symbol")
    assert sorted(str(s) for s in lib.lookup_symbol("foo")) == ["foo@@MYLIB_2.0", "foo@MYLIB_1.0"]
    user = read_elf_facts(built.get("librunpath.so"))
    s = user.needs_symbol("foo")
    assert s is not None and s.version == "MYLIB_2.0" and s.version_file == "libver.so.1" and not s.defined
    assert user.needs_symbol("pthread_create").version_file == "libc.so.6"
    assert user.needs_symbol("bar", "MYLIB_2.0") is None
    assert user.needs_symbol("use") is None            # defined, not needed
    assert user.defines("use")
    # the "version `MYLIB_3.0' not found" check: needed by one file, defined by the other?
    for sym in user.symbols():
        if sym.version_file == "libver.so.1":
            assert lib.defines(sym.name, sym.version), sym


def test_symbol_count_and_iteration_are_lazy(built: Built) -> None:
    path = built.get("libcxx.so")
    facts = read_elf_facts(path)
    it = facts.symbols()
    first = next(it)
    assert first.index == 1
    it.close()
    with ElfFile(path) as elf:
        syms = DynamicSymbols(elf)
        assert syms.count == facts.dynsym_count and len(syms) == syms.count - 1
        assert syms._names is None and syms._versym is False    # nothing read before it is asked for
        names = [s.name for s in syms if s.defined]
        assert names and all(syms.defines(n) for n in names[:50])


@pytest.mark.parametrize("name", ["libver.so.1", "libsysv.so", "libboth.so", "libcxx.so"])
def test_defines_by_hash_agrees_with_a_scan(built: Built, name: str) -> None:
    r = Readelf(built.get(name))
    with ElfFile(built.get(name)) as elf:
        syms = DynamicSymbols(elf)
        exported = {s.name for s in syms if s.defined and s.binding != "LOCAL"}
        imported = {s.name for s in syms if not s.defined}
        for n in exported:
            assert syms.defines(n), n
        for n in imported - exported:
            assert not syms.defines(n), n
            assert syms.needs_symbol(n) is not None
    assert exported == {t[7].split("@")[0] for t in r.symbols if t[6] and t[4] != "LOCAL"}


def test_cxx_requirements(built: Built) -> None:
    facts = read_elf_facts(built.get("libcxx.so"))
    assert "libstdc++.so.6" in facts.needed
    req = facts.required_versions["libstdc++.so.6"]
    assert any(v.startswith("GLIBCXX_3.4") for v in req) and any(v.startswith("CXXABI_1.3") for v in req)
    assert facts.max_versions["GLIBCXX"] == _max_version(req, "GLIBCXX")
    assert facts.max_versions["CXXABI"] == _max_version(req, "CXXABI")
    assert any(p.tool == "GCC" for p in facts.producers)


def test_notes_and_stack(built: Built) -> None:
    assert read_elf_facts(built.get("libexecstack.so")).exec_stack is True
    assert read_elf_facts(built.get("libexecstack.so")).stack_flags == "RWE"
    assert read_elf_facts(built.get("librunpath.so")).exec_stack is False
    assert read_elf_facts(built.get("libbuildid.so")).build_id == "0123456789abcdef0123456789abcdef01234567"
    obj = read_elf_facts(built.get("plain.o"))
    assert obj.type == "relocatable" and obj.exec_stack is None and obj.needed == () and obj.dynsym_count is None
    prog = read_elf_facts(built.get("prog"))
    assert prog.interpreter and prog.abi_tag is not None and prog.abi_tag.os == "Linux"


def test_package_note(built: Built) -> None:
    facts = read_elf_facts(built.get("libpackage.so"))
    assert facts.package == json.loads(PACKAGE_JSON)
    assert facts.package_text == PACKAGE_JSON


def test_isa_level_properties(built: Built) -> None:
    v3 = read_elf_facts(built.get("libv3.so"))
    assert v3.gnu_properties.isa_needed == ("x86-64-v3",) and v3.isa_level_needed == "x86-64-v3"
    assert v3.gnu_properties.isa_needed_bits == 1 << 2


def test_isa_needed_from_mneeded(built: Built) -> None:
    p = read_elf_facts(built.get("libneeded.so")).gnu_properties
    assert p is not None and "x86-64-v3" in p.isa_needed


def test_isa_used_and_features_used(built: Built) -> None:
    p = read_elf_facts(built.get("libused.so")).gnu_properties
    assert p.isa_needed == ("x86-64-v2",)
    assert "x86-64-v3" in p.isa_used and "YMM" in p.features_used


def test_cet_features(built: Built) -> None:
    p = read_elf_facts(built.get("libcet.so")).gnu_properties
    assert p.x86_features == ("IBT", "SHSTK") and p.x86_features_bits == 3


def test_static_tls(built: Built) -> None:
    facts = read_elf_facts(built.get("libtls.so"))
    assert "STATIC_TLS" in facts.dt_flags and facts.tls_size == 256


def test_elf32(built: Built) -> None:
    facts = read_elf_facts(built.get("lib32.so"))
    assert (facts.bits, facts.elf_class, facts.machine, facts.soname) == (32, "ELF32", "x86", "lib32.so.1")


def test_accepts_path_elffile_and_bytes(built: Built) -> None:
    path = built.get("libboth.so")
    a = read_elf_facts(path)
    with ElfFile(path) as elf:
        b = read_elf_facts(elf)
        assert b.defines("foo", "MYLIB_2.0")
    c = read_elf_facts(path.read_bytes())
    assert a.to_dict() == b.to_dict() == {**c.to_dict(), "path": a.path}
    assert b.defines("bar")            # the ElfFile is closed now: the file is mapped again


def test_not_elf_raises(tmp_path: Path) -> None:
    p = tmp_path / "x.so"
    p.write_bytes(b"!<arch>\n" + b"\0" * 100)
    with pytest.raises(ElfError):
        read_elf_facts(p)
    with pytest.raises(ElfError):
        read_elf_facts(tmp_path / "missing.so")
    with pytest.raises(ElfError):
        read_elf_facts(b"\x7fELF\x02\x01\x01" + b"\0" * 20)   # header cut short


def test_section_headers_stripped_falls_back_to_dynamic_tags(built: Built, tmp_path: Path) -> None:
    """With no section headers (as after sstrip), the facts come from PT_DYNAMIC, DT_* and PT_NOTE."""
    path = built.get("libboth.so")
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)          # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    out = tmp_path / "stripped.so"
    out.write_bytes(bytes(data))
    full, bare = read_elf_facts(path), read_elf_facts(out)
    assert bare.errors == ()
    for f in ("soname", "needed", "rpath", "runpath", "version_needs", "version_defs", "dynsym_count", "build_id",
              "package", "gnu_properties", "exec_stack", "dt_flags_1"):
        assert getattr(bare, f) == getattr(full, f), f
    assert bare.comment == ()                      # .comment is not loaded: gone with the headers
    assert [str(s) for s in bare.symbols()] == [str(s) for s in full.symbols()]
    assert bare.defines("baz", "MYLIB_2.0") and bare.needs_symbol("pthread_create") is not None


# -- other byte orders and machines: binutils for s390x (64-bit big-endian, 8-byte .hash entries),
# powerpc (32-bit big-endian) and aarch64 (BTI property), when installed (Debian: binutils-<triple>)
DEP_S = """
        .data
        .globl bar_old, bar_new, baz
        .type bar_old,@object
bar_old: .long 1
        .size bar_old,4
        .type bar_new,@object
bar_new: .long 2
        .size bar_new,4
        .type baz,@object
baz:    .long 3
        .size baz,4
        .symver bar_old,bar@DEP_1.0
        .symver bar_new,bar@@DEP_2.0
        .section .note.GNU-stack,"",@progbits
"""
DEP_MAP = "DEP_1.0 { global: bar; local: *; };\nDEP_2.0 { global: bar; baz; } DEP_1.0;\n"
USE_S = """
        .data
        .globl ptrs
        .type ptrs,@object
ptrs:   .{w} bar
        .{w} baz
        .size ptrs,{n}
        .section .note.GNU-stack,"",@progbits
"""
CROSS = {"s390x": "quad", "powerpc": "long", "aarch64": "quad"}


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path] | str]:
    """triple -> (libdep, libuse), or why it could not be built."""
    root = tmp_path_factory.mktemp("elffacts-cross")
    (root / "dep.s").write_text(DEP_S)
    (root / "dep.map").write_text(DEP_MAP)
    out: dict[str, tuple[Path, Path] | str] = {}
    for arch, word in CROSS.items():
        as_, ld = shutil.which(f"{arch}-linux-gnu-as"), shutil.which(f"{arch}-linux-gnu-ld")
        if not as_ or not ld:
            out[arch] = f"binutils for {arch} are not installed (apt-get install binutils-{arch}-linux-gnu)"
            continue
        (root / f"use_{arch}.s").write_text(USE_S.format(w=word, n=16 if word == "quad" else 8))
        extra = ["-z", "force-bti"] if arch == "aarch64" else []
        ok = (_build(root, [as_, "dep.s", "-o", f"dep_{arch}.o"])
              and _build(root, [ld, "-shared", "-soname", "libdep.so.1", "--version-script", "dep.map", "--build-id=sha1",
                                "--hash-style=both", "-o", f"libdep_{arch}.so.1", f"dep_{arch}.o"])
              and _build(root, [as_, f"use_{arch}.s", "-o", f"use_{arch}.o"])
              and _build(root, [ld, "-shared", "-soname", "libuse.so.2", "-rpath", "$ORIGIN/lib", "--enable-new-dtags",
                                "--build-id", "--hash-style=sysv", "-z", "execstack", *extra, "-o", f"libuse_{arch}.so",
                                f"use_{arch}.o", f"libdep_{arch}.so.1"]))
        out[arch] = (root / f"libdep_{arch}.so.1", root / f"libuse_{arch}.so") if ok else f"{arch} binutils failed"
    return out


def _cross(cross: dict, arch: str) -> tuple[Path, Path]:
    got = cross[arch]
    if isinstance(got, str):
        pytest.skip(got)
    return got


@pytest.mark.parametrize("arch", list(CROSS))
def test_other_byte_orders_and_machines_match_readelf(cross, arch: str) -> None:
    dep, use = _cross(cross, arch)
    d, u = read_elf_facts(dep), read_elf_facts(use)
    assert_matches_readelf(d, dep)
    assert_matches_readelf(u, use)
    assert (u.endian, u.bits) == {"s390x": ("big", 64), "powerpc": ("big", 32), "aarch64": ("little", 64)}[arch]
    assert u.required_versions == {"libdep.so.1": ["DEP_2.0"]} and u.exec_stack is True
    assert [v.name for v in d.version_defs] == ["libdep.so.1", "DEP_1.0", "DEP_2.0"]
    assert d.defines("bar", "DEP_1.0") and d.defines("bar", "DEP_2.0") and d.defines("baz") and not d.defines("ptrs")
    assert u.needs_symbol("bar").version == "DEP_2.0" and u.defines("ptrs")   # u: SysV hash only
    if arch == "aarch64":
        assert u.gnu_properties.aarch64_features == ("BTI",)


# -- the system's own libraries and the big ones, when present ------------------------------------------------------
SYSTEM_LIBS = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
               "/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
               "/lib64/ld-linux-x86-64.so.2", "/usr/bin/readelf"]


@pytest.mark.parametrize("path", SYSTEM_LIBS)
def test_system_libraries_match_readelf(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    assert_matches_readelf(read_elf_facts(path), path)


BIG = ["libtorch_cpu.so", "libcublasLt.so.13", "libnccl.so.2", "libcudnn_graph.so.9", "libtorch_cuda.so"]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", BIG)
def test_big_libraries_match_readelf_and_touch_little(name: str) -> None:
    path = MATERIALS / name
    if not path.exists():
        pytest.skip(f"{path} is not here (see bench/README.md to fetch it)")
    read_elf_facts(path)                             # warm the page cache for the headers
    _, pages = pages_touched(lambda: read_elf_facts(path))
    # the facts come from headers and the dynamic tables: a few pages of the mapping, not the file
    # (the speed beside readelf is bench/bench_elf.py's)
    assert pages < path.stat().st_size // 4096 // 100, f"{pages} page faults"
    assert_matches_readelf(read_elf_facts(path), path, symbols=name != "libtorch_cpu.so")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_components_of_real_cuda_libraries() -> None:
    found = {}
    for name in ("libnccl.so.2", "libcudnn_graph.so.9", "libtorch_cuda.so"):
        if (MATERIALS / name).exists():
            found[name] = {(c.name, c.where): c.version for c in read_elf_facts(MATERIALS / name, components=True).components}
    if not found:
        pytest.skip(f"no CUDA libraries in {MATERIALS}")
    if "libnccl.so.2" in found:
        assert re.fullmatch(r"2\.\d+\.\d+", found["libnccl.so.2"][("nccl", ".rodata")])
        assert found["libnccl.so.2"][("nccl", "DT_SONAME")] == "2"
    if "libcudnn_graph.so.9" in found:
        assert found["libcudnn_graph.so.9"][("cudnn", ".rodata")].startswith("9.")
    if "libtorch_cuda.so" in found:   # names NCCL only in messages ("requires NCCL version 2.27.0"): no banner
        assert ("nccl", ".rodata") not in found["libtorch_cuda.so"]
        assert found["libtorch_cuda.so"][("cudart", "DT_NEEDED")].isdigit()


def test_components_only_when_asked(built: Built) -> None:
    assert read_elf_facts(built.get("libboth.so")).components is None
    assert read_elf_facts(built.get("libboth.so"), components=True).components == ()


# -- robustness: truncation and mutation of a real library ------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402


def check_survives(data: bytes) -> ElfFacts | None:
    """read_elf_facts returns or raises ElfError; what it returns is sane and bounded."""
    try:
        facts = read_elf_facts(data, components=True)
    except ElfError:
        return None
    json.dumps(facts.to_dict())
    for e in facts.errors:
        assert "internal error" not in e and "\n" not in e, e
    assert len(facts.needed) <= len(data) // 8
    assert sum(len(n.versions) + 1 for n in facts.version_needs) <= len(data) // 16 + 1
    assert sum(len(d.parents) + 1 for d in facts.version_defs) <= len(data) // 8 + 1
    try:
        with facts.open_symbols() as syms:
            n = 0
            for s in syms:
                n += 1
                str(s)
            assert n <= len(data) // 16
            syms.defines("foo")
            syms.defines("foo", "MYLIB_2.0")
            syms.needs_symbol("pthread_create")
            syms.lookup("bar")
    except ElfError:
        pass
    return facts


@pytest.fixture(scope="module")
def victim(built: Built) -> tuple[bytes, list[tuple[int, int, str]]]:
    """libboth.so's bytes and the (offset, width, what) of every field worth corrupting."""
    path = built.get("libboth.so")
    data = path.read_bytes()
    fields: list[tuple[int, int, str]] = [(0x20, 8, "e_phoff"), (0x28, 8, "e_shoff"), (0x36, 2, "e_phentsize"),
                                          (0x38, 2, "e_phnum"), (0x3A, 2, "e_shentsize"), (0x3C, 2, "e_shnum"),
                                          (0x3E, 2, "e_shstrndx")]
    with ElfFile(path) as elf:
        for s in elf.sections:
            base = elf.e_shoff + s.index * 64
            for off, width, what in ((0, 4, "name"), (4, 4, "type"), (24, 8, "offset"), (32, 8, "size"),
                                     (40, 4, "link"), (44, 4, "info"), (48, 8, "addralign"), (56, 8, "entsize")):
                fields.append((base + off, width, f"{s.name}.sh_{what}"))
        for i, seg in enumerate(elf.segments):
            base = elf.e_phoff + i * 56
            for off, width, what in ((0, 4, "type"), (8, 8, "offset"), (16, 8, "vaddr"), (32, 8, "filesz"),
                                     (48, 8, "align")):
                fields.append((base + off, width, f"phdr{i}.p_{what}"))
        dyn = elf.section(".dynamic")
        for i in range(dyn.size // 16):
            fields.append((dyn.offset + i * 16, 8, f"dyn{i}.d_tag"))
            fields.append((dyn.offset + i * 16 + 8, 8, f"dyn{i}.d_val"))
        strings = StringTable(elf, elf.section(".dynstr").offset, elf.section(".dynstr").size, ".dynstr")
        vr = elf.section(".gnu.version_r")
        assert len(list(iter_verneed(elf, vr.offset, vr.size, strings))) == 2
        for k in range(vr.size // 16):     # every field of every entry: vn_* and vna_* share the 16-byte grid
            at = vr.offset + 16 * k
            fields += [(at, 2, "vn.version|vna.hash"), (at + 2, 2, "vn.cnt"), (at + 4, 4, "vn.file|vna.flags"),
                       (at + 8, 4, "vn.aux|vna.name"), (at + 12, 4, "vn.next|vna.next")]
        vd = elf.section(".gnu.version_d")
        for k in range(vd.size // 4):
            fields.append((vd.offset + 4 * k, 4, "verdef word"))
        for name in (".note.gnu.build-id", ".note.gnu.property", ".note.package", ".gnu.hash", ".hash"):
            s = elf.section(name)
            if s is not None:
                for k in range(min(s.size // 4, 64)):
                    fields.append((s.offset + 4 * k, 4, f"{name} word {k}"))
    return data, fields


def _mutate(data: bytes, changes: list[tuple[tuple[int, int, str], int]]) -> bytes:
    out = bytearray(data)
    for (off, width, _what), value in changes:
        out[off:off + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")
    return bytes(out)


_INTERESTING = st.sampled_from([0, 1, 2, 3, 4, 7, 8, 12, 16, 20, 24, 0x40, 0x100, 0x1000, 0x7FFF, 0x8000, 0xFFFF,
                                0x7FFFFFFF, 0xFFFFFFF0, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 1 << 40,
                                # tags and types, to turn one table into another
                                5, 6, 10, 11, 14, 15, 29, 30, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFF6, 0x6FFFFFFB,
                                0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF, 0x6474E551, 0x6474E553])
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.timeout(300)
@_SETTINGS
@given(st.data())
def test_truncated_files_never_crash(victim, data) -> None:
    raw, _ = victim
    cut = data.draw(st.integers(0, len(raw)))
    check_survives(raw[:cut])


@pytest.mark.timeout(300)
@_SETTINGS
@given(st.data())
def test_mutated_fields_never_crash(victim, data) -> None:
    raw, fields = victim
    n = data.draw(st.integers(1, 4))
    changes = []
    for _ in range(n):
        f = data.draw(st.sampled_from(fields))
        value = data.draw(_INTERESTING | st.integers(0, len(raw) + 64) | st.integers(0, (1 << 8 * f[1]) - 1)
                          | st.just(f[0]) | st.just(len(raw) - 1))
        changes.append((f, value))
    check_survives(_mutate(raw, changes))


@pytest.mark.slow
@pytest.mark.timeout(300)
@_SETTINGS
@given(st.data())
def test_random_bytes_never_crash(victim, data) -> None:
    raw, _ = victim
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 64))):
        out[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    check_survives(bytes(out))


@pytest.mark.timeout(60)
@_SETTINGS
@given(st.binary(max_size=512))
def test_garbage_is_not_elf(blob: bytes) -> None:
    for data in (blob, b"\x7fELF" + blob, b"\x7fELF\x02\x01\x01" + blob, b"\x7fELF\x01\x02\x01" + blob):
        check_survives(data)


def _verneed_positions(raw: bytes) -> tuple[int, int, int]:
    elf = ElfFile.from_bytes(raw)
    s = elf.section(".gnu.version_r")
    idx = [t for t in elf.sections if t.name == ".gnu.version_r"][0].index
    return s.offset, elf.e_shoff + idx * 64, s.size


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["next-zero-count-huge", "aux-count-huge", "aux-next-backwards", "next-backwards",
                                  "next-self", "aux-next-one"])
def test_version_chain_loops_are_cut(victim, case: str) -> None:
    """Version-need chains that would loop (or walk forever) in a reader trusting the counts."""
    raw, _ = victim
    off, shdr, size = _verneed_positions(raw)
    data = bytearray(raw)
    if case == "next-zero-count-huge":
        struct.pack_into("<I", data, off + 12, 0)              # first vn_next = 0 ...
        struct.pack_into("<I", data, shdr + 44, 0xFFFFFFFF)     # ... but sh_info claims 4 G entries
    elif case == "aux-count-huge":
        struct.pack_into("<H", data, off + 2, 0xFFFF)           # vn_cnt
        struct.pack_into("<I", data, off + 16 + 12, 16)         # vna_next keeps going...
    elif case == "aux-next-backwards":
        struct.pack_into("<I", data, off + 16 + 12, 0xFFFFFFF0)  # vna_next = -16 as a C int
    elif case == "next-backwards":
        struct.pack_into("<I", data, off + 12, (-16) & 0xFFFFFFFF)
    elif case == "next-self":
        struct.pack_into("<I", data, off + 12, 0)
        struct.pack_into("<H", data, off + 2, 0xFFFF)
        struct.pack_into("<I", data, off + 8, 0)                # aux at the entry itself
    elif case == "aux-next-one":
        struct.pack_into("<H", data, off + 2, 0xFFFF)
        for k in range(size // 16):
            struct.pack_into("<I", data, off + 16 * k + 12, 1)  # every next = 1: overlapping entries
    tracemalloc.start()
    try:
        facts = check_survives(bytes(data))
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 32 << 20, peak
    if facts is not None:
        assert sum(len(n.versions) for n in facts.version_needs) <= size // 16


@pytest.mark.timeout(60)
def test_hash_chain_loops_are_cut(victim) -> None:
    raw, _ = victim
    elf = ElfFile.from_bytes(raw)
    data = bytearray(raw)
    h = elf.section(".hash")
    nbucket, nchain = struct.unpack_from("<II", raw, h.offset)
    chains = h.offset + 8 + nbucket * 4
    for i in range(nchain):
        struct.pack_into("<I", data, chains + 4 * i, i)         # every chain points at itself
    g = elf.section(".gnu.hash")
    nb, symoff, bloom, _ = struct.unpack_from("<IIII", raw, g.offset)
    gchain = g.offset + 16 + bloom * 8 + nb * 4
    for i in range((g.offset + g.size - gchain) // 4):
        struct.pack_into("<I", data, gchain + 4 * i, 0)         # no chain ever ends
    facts = check_survives(bytes(data))
    assert facts is not None
    with facts.open_symbols() as syms:
        syms.defines("foo")
        assert syms.needs_symbol("pthread_create") is not None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("arch", ["s390x", "powerpc"])
@_SETTINGS
@given(data=st.data())
def test_big_endian_mutations_never_crash(cross, arch: str, data) -> None:
    dep, use = _cross(cross, arch)
    raw = data.draw(st.sampled_from([dep, use])).read_bytes()
    out = bytearray(raw[:data.draw(st.integers(len(raw) // 2, len(raw)))])
    for _ in range(data.draw(st.integers(0, 24))):
        at = data.draw(st.integers(0, len(out) - 1))
        out[at] = data.draw(st.integers(0, 255))
    check_survives(bytes(out))
