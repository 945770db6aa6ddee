"""The three complete GPU core dumps of fixtures/gpu-cores/complete (H100, driver 580.159, CUDA
13.0), read by binary/cudacore and checked, field by field, against cuda-gdb 13.0's answers on
the same dumps (the `*.cuda-gdb.txt` beside each, parsed here: nothing is hard-coded)."""

from __future__ import annotations

import json
import lzma
import re
from functools import cache
from pathlib import Path

import pytest

from crashlens.pipeline import analyze_paths
from crashlens.binary.cubin_lines import nvdisasm_path
from crashlens.binary.cudacore import read_gpu_core
from crashlens.binary.symbolize import demangler_available

FX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu-cores" / "complete"
DUMPS = ["lw_trap", "lw_misaligned", "nr_trap"]


@cache
def dump(name: str) -> bytes:
    return lzma.decompress((FX / f"{name}.nvcudmp.xz").read_bytes())


@cache
def core(name: str):
    return read_gpu_core(dump(name))


@cache
def cuda_gdb(name: str) -> dict:
    """What cuda-gdb said: focus, stop reason, `info cuda devices|kernels|lanes`, bt, x/2i, info
    line, $errorpc."""
    text = (FX / f"{name}.cuda-gdb.txt").read_text()
    g: dict = {}
    m = re.search(r"focus set to CUDA kernel (\d+), grid (\d+), block \((\d+),(\d+),(\d+)\), thread \((\d+),(\d+),(\d+)\), "
                  r"device (\d+), sm (\d+), warp (\d+), lane (\d+)", text)
    v = [int(x) for x in m.groups()]
    g.update(grid=v[1], block=tuple(v[2:5]), thread=tuple(v[5:8]), device=v[8], sm=v[9], warp=v[10], lane=v[11])
    if m := re.search(r"CUDA Exception: (.+)", text):
        g["exception"] = m.group(1).strip()
    if m := re.search(r"terminated with signal (\w+), (.+?)\.", text):
        g["signal"], g["signal_text"] = m.groups()
    if m := re.search(r"exception was triggered at PC (0x[0-9a-f]+)\s+(\S+)\(.*?\)\s+\((\S+):(\d+)\)", text):
        g["trigger_pc"], g["trigger_fn"], g["trigger_file"], g["trigger_line"] = (
            int(m.group(1), 16), m.group(2), m.group(3), int(m.group(4)))
    lines = text.splitlines()
    dev_head = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Dev PCI Bus/Dev ID"))
    row = lines[dev_head + 1].lstrip("* ").split()
    # Dev, PCI, Name (words), Description, SM Type, SMs, Warps/SM, Lanes/Warp, Max Regs/Lane, mask
    g["dev"] = {"pci": row[1], "name": " ".join(row[2:-7]), "description": row[-7], "sm_type": row[-6],
                "sms": int(row[-5]), "warps": int(row[-4]), "lanes": int(row[-3]), "regs": int(row[-2])}
    k_head = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Kernel Parent Dev Grid"))
    krow = lines[k_head + 1].lstrip("* ").split()
    g["kernel"] = {"grid": int(krow[3]), "grid_dim": krow[6], "block_dim": krow[7], "invocation": krow[8]}
    lanes = {}
    for ln in lines:
        if m := re.match(r"^[* ]\s*(\d+)\s+(active|divergent)\s+(0x[0-9a-f]+)\s+\((\d+),(\d+),(\d+)\)\s+(.+?)\s*$", ln):
            lanes[int(m.group(1))] = {"state": m.group(2), "pc": int(m.group(3), 16),
                                     "thread": tuple(int(x) for x in m.group(4, 5, 6)), "exception": m.group(7)}
    g["lanes"] = lanes
    m = re.search(r"^#0\s+(\w+)<<<\((\S+)\),\((\S+)\)>>> \(\) at (\S+):(\d+)", text, re.M)
    g["bt0"] = {"kernel": m.group(1), "grid_dim": f"({m.group(2)})", "block_dim": f"({m.group(3)})",
                "file": m.group(4), "line": int(m.group(5))}
    g["bt"] = re.findall(r"^#(\d+)\s", text, re.M)
    xs = re.findall(r"^(=>| ) (0x[0-9a-f]+) <(\w+)\+(\d+)>:\s+(.+)$", text, re.M)
    g["insns"] = [(int(a, 16), fn, int(off), ins.strip()) for _m, a, fn, off, ins in xs]
    m = re.search(r'Line (\d+) of "(.+?)" starts at address (0x[0-9a-f]+) <(\w+)\+(\d+)>', text)
    g["info_line"] = {"line": int(m.group(1)), "file": m.group(2), "start": int(m.group(3), 16),
                      "function": m.group(4)}
    m = re.search(r"^\$1 = (\S+)", text, re.M)
    g["errorpc"] = int(m.group(1), 16) if m.group(1).startswith("0x") else None
    return g


def sass(text: str) -> str:
    """An instruction as cuda-gdb and nvdisasm both write it, spacing aside."""
    return re.sub(r"\s+", "", text).rstrip(";")


@pytest.mark.parametrize("name", DUMPS)
def test_device_matches_cuda_gdb(name):
    c, g = core(name), cuda_gdb(name)
    assert c.complete and not c.notes
    (dev,) = c.devices
    want = g["dev"]
    assert (dev.name, dev.type, dev.sm_type, dev.num_sms, dev.warps_per_sm, dev.lanes_per_warp, dev.regs_per_lane) == (
        want["name"], want["description"], want["sm_type"], want["sms"], want["warps"], want["lanes"], want["regs"])
    assert dev.pci == want["pci"] and dev.sm_version == want["sm_type"][3] + "." + want["sm_type"][4:]
    assert c.driver and "CUDA 13.0" in c.driver


@pytest.mark.parametrize("name", DUMPS)
def test_kernel_matches_cuda_gdb(name):
    c, g = core(name), cuda_gdb(name)
    (grid,) = c.grids
    assert grid.grid_id == g["kernel"]["grid"] == g["grid"]
    fmt = "({},{},{})".format
    assert (fmt(*grid.grid_dim), fmt(*grid.block_dim)) == (g["kernel"]["grid_dim"], g["kernel"]["block_dim"])
    assert (fmt(*grid.grid_dim), fmt(*grid.block_dim)) == (g["bt0"]["grid_dim"], g["bt0"]["block_dim"])
    assert grid.kernel == g["info_line"]["function"]  # the mangled name cuda-gdb's x/i and info line print
    base = g["kernel"]["invocation"].split("(")[0]
    assert g["bt0"]["kernel"] == base
    if demangler_available():
        assert grid.kernel_demangled.split("(")[0] == base
        if "trigger_fn" in g:
            assert grid.kernel_demangled.startswith(g["trigger_fn"] + "(")


@pytest.mark.parametrize("name", DUMPS)
def test_focus_lane_matches_cuda_gdb(name):
    """The first fault is cuda-gdb's focus: the exception (or signal), block, thread, SM, warp, lane, pc."""
    c, g = core(name), cuda_gdb(name)
    f = c.first_fault
    assert (f.device, f.sm, f.warp, f.lane, f.block, f.thread, f.grid_id) == (
        g["device"], g["sm"], g["warp"], g["lane"], g["block"], g["thread"], g["grid"])
    if "exception" in g:
        assert f.exception == g["exception"] and f.signal is None
        assert f.exception_name == "CUDBG_EXCEPTION_" + g["exception"].upper().replace(" ", "_").replace("-", "_")
    else:
        assert (f.signal, f.exception) == (g["signal"], g["signal_text"])
        assert f.exception_code == 0 and f.broken
    lane = g["lanes"][f.lane]
    assert f.pc == lane["pc"] == g["insns"][0][0] and f.thread == lane["thread"]
    assert f.error_pc == g["errorpc"]  # "<unavailable>" -> None
    if "trigger_pc" in g:
        assert f.error_pc == g["trigger_pc"]


@pytest.mark.parametrize("name", DUMPS)
def test_every_lane_cuda_gdb_lists(name):
    """`info cuda lanes` of the focus warp: the lanes with an exception are faults; for a trap,
    the warp's one active lane is the fault and the divergent ones are not."""
    c, g = core(name), cuda_gdb(name)
    f0 = c.first_fault
    mine = {f.lane: f for f in c.faults if (f.device, f.sm, f.warp) == (f0.device, f0.sm, f0.warp)}
    for ln, want in g["lanes"].items():
        if want["exception"] != "None":
            assert mine[ln].exception == want["exception"] and mine[ln].pc == want["pc"]
            assert mine[ln].thread == want["thread"]
        else:
            assert (ln in mine) == (want["state"] == "active")
            assert (f0.active_mask >> ln) & 1 == (want["state"] == "active")


@pytest.mark.parametrize("name", DUMPS)
def test_module_function_offset_line_and_instruction_match_cuda_gdb(name, monkeypatch):
    monkeypatch.delenv("CRASHLENS_NO_NVDISASM", raising=False)  # tests/test_gpu_crash.py sets it
    c, g = read_gpu_core(dump(name)), cuda_gdb(name)
    f = c.first_fault
    at_pc = f.pc_location
    pc0, fn, off, ins = g["insns"][0]
    assert (at_pc.function, at_pc.function_offset) == (fn, off)
    assert (at_pc.file, at_pc.line) == (g["info_line"]["file"], g["info_line"]["line"]) == (g["bt0"]["file"], g["bt0"]["line"])
    mod = next(m for m in c.modules if m.handle == f.module_handle)
    assert mod.relocated and mod.arch == int(g["dev"]["sm_type"][3:]) and f.kernel in mod.kernels
    if "trigger_line" in g:  # the faulting instruction: the error pc's line
        assert f.location.line == g["trigger_line"] and f.location.file.endswith(g["trigger_file"])
        assert f.location.function_offset == off - (f.pc - f.error_pc)
    else:
        assert f.location == at_pc
    assert len(at_pc.words) == 2
    if nvdisasm_path():
        assert sass(at_pc.instruction) == sass(ins)
    if f.signal:  # the trap instruction just before the pc
        assert f.trap is not None and f.trap.function_offset == off - 16 and f.trap.line == g["info_line"]["line"] - 1
        if nvdisasm_path():
            assert f.trap.instruction.startswith("BPT.TRAP")


@pytest.mark.parametrize("name", DUMPS)
def test_device_backtrace_matches_cuda_gdb(name):
    c, g = core(name), cuda_gdb(name)
    assert len(c.first_fault.backtrace) + 1 == len(set(g["bt"]))  # frame #0 is the pc itself


def analysis(paths):
    from crashlens.report.json import to_dict
    from crashlens.signature import signature

    a = analyze_paths([str(p) for p in paths])
    return a, json.loads(json.dumps(to_dict(a, signature(a)), default=str))


@pytest.mark.parametrize("name", DUMPS)
@pytest.mark.parametrize("with_log", [False, True])
def test_analyze_names_kernel_exception_device_thread_and_line(name, with_log):
    c, g = core(name), cuda_gdb(name)
    f = c.first_fault
    paths = [FX / f"{name}.nvcudmp.xz"] + ([FX / f"{name}.log"] if with_log else [])
    a, d = analysis(paths)
    want = "gpu-illegal-memory-access" if "Misaligned" in g.get("exception", "") else "device-side-assert"
    assert a.causes[0].category == want == f.category
    gc = d["gpu_crash"]
    line = g.get("trigger_line", g["info_line"]["line"])
    assert (gc["exception"], gc["block"], gc["thread"], gc["sm"], gc["warp"], gc["lane"]) == (
        g.get("exception", g.get("signal_text")), "({},{},{})".format(*g["block"]), "({},{},{})".format(*g["thread"]),
        g["sm"], g["warp"], g["lane"])
    assert (gc["device_name"], gc["device_pci"], gc["device_sms"]) == (g["dev"]["name"], g["dev"]["pci"], g["dev"]["sms"])
    assert (gc["line"], gc["pc_line"], gc["pc"], gc.get("error_pc")) == (line, g["info_line"]["line"], f.pc, g["errorpc"])
    assert gc["kernel_mangled"] == g["info_line"]["function"] and gc["grid_dim"] == g["kernel"]["grid_dim"]
    text = " ".join([a.causes[0].explanation, a.causes[0].evidence[0].text if a.causes[0].evidence else ""])
    base = g["bt0"]["kernel"]
    for needle in (base, gc["exception"], g["dev"]["name"], gc["thread"], gc["block"], f"crash.cu:{line}"):
        assert needle in text, needle
    assert a.code_path[-2].function == gc["kernel"] and a.code_path[-2].code.startswith(f"{base}<<<")
    assert (a.code_path[-1].file, a.code_path[-1].line) == (g["info_line"]["file"], line)


def test_cut_or_damaged_complete_dump_gives_a_partial_answer():
    import random
    import struct

    data = dump("nr_trap")
    cut = read_gpu_core(data[: len(data) - 100])  # the section table loses its end
    assert not cut.faults and "truncated" in cut.notes[0]
    shoff, = struct.unpack_from("<Q", data, 0x28)
    lanes = read_gpu_core(data[:shoff])  # tables intact, section table gone
    assert "truncated" in lanes.notes[0]
    rnd = random.Random(11)
    for _ in range(60):  # bytes flipped in the tables and the section headers: never a traceback
        b = bytearray(data)
        for _ in range(24):
            b[rnd.randrange(64, len(b))] = rnd.randrange(256)
        read_gpu_core(bytes(b))
    b = bytearray(data)
    for k in range(struct.unpack_from("<H", data, 0x3C)[0]):  # every table claims 1-byte rows
        struct.pack_into("<Q", b, shoff + k * 64 + 56, 1)
    damaged = read_gpu_core(bytes(b))
    assert not damaged.faults and any("damaged" in n for n in damaged.notes)
