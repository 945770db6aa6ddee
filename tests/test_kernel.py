"""parse_kernel: dmesg / journalctl / syslog kernel records -> Evidence(kind="dmesg")."""

from __future__ import annotations

import pytest

from crashlens.model import Line, Loc
from crashlens.parsers.kernel import parse_kernel, xid_info


def kline(text: str, n: int = 1) -> Line:
    return Line(loc=Loc("dmesg.log", n), text=text)


def facts(text: str) -> dict:
    ev = parse_kernel(kline(text))
    assert ev is not None, f"expected a kernel record: {text!r}"
    assert ev.kind == "dmesg"
    assert ev.text == text
    return dict(ev.facts)


# ----------------------------------------------------------------------------- Xid


def test_xid_modern_format_with_pid_and_process():
    f = facts(
        "NVRM: Xid (PCI:0000:00:06): 13, pid=844, name=k_sm90, Graphics Exception: "
        "ESR 0x405848=0x2000000 0x405850=0x0 0x40584c=0x0 0x405854=0x0"
    )
    assert f["event"] == "xid"
    assert f["xid"] == 13
    assert f["pci"] == "0000:00:06"
    assert f["pid"] == 844
    assert f["process"] == "k_sm90"
    assert f["detail"].startswith("Graphics Exception: ESR")
    assert "graphics engine exception" in f["xid_meaning"]
    assert f["xid_cause"] == "application"


def test_xid_old_format_without_pid():
    f = facts("NVRM: Xid (0000:01:00): 79, GPU has fallen off the bus.")
    assert f["event"] == "xid"
    assert f["xid"] == 79
    assert f["pci"] == "0000:01:00"
    assert f["pid"] is None and f["process"] is None
    assert f["detail"] == "GPU has fallen off the bus."
    assert "fallen off the bus" in f["xid_meaning"]
    assert f["xid_cause"] == "hardware"


def test_xid_unknown_pid_and_name_are_none():
    f = facts("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    assert f["xid"] == 79
    assert f["pid"] is None
    assert f["process"] is None
    assert f["detail"] == "GPU has fallen off the bus."


def test_xid_pid_without_name_keeps_detail():
    f = facts(
        "NVRM: Xid (PCI:0000:17:00): 31, pid=27615, Ch 00000008, intr 10000000. MMU Fault: "
        "ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f2a_b4000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
    )
    assert f["xid"] == 31
    assert f["pid"] == 27615
    assert f["process"] is None
    assert f["detail"].startswith("Ch 00000008")
    assert "illegal memory access" in f["xid_meaning"]


def test_xid_with_unstripped_syslog_prefix():
    f = facts(
        "Jun 30 11:07:05 gpu-node-12 kernel: [ 8812.044117] NVRM: Xid (PCI:0000:b7:00): 94, pid=2467, "
        "name=python3, Contained: CE User Channel (0x0). RST: No, D-RST: No"
    )
    assert f["xid"] == 94
    assert f["process"] == "python3"
    assert f["pci"] == "0000:b7:00"
    assert "contained ECC" in f["xid_meaning"]


@pytest.mark.parametrize(
    "code, words",
    [
        (8, "stopped processing"),
        (31, "page fault"),
        (43, "channel was reset"),
        (45, "preemptive cleanup"),
        (48, "double-bit ECC"),
        (63, "retirement"),
        (64, "retirement"),
        (74, "NVLink"),
        (92, "single-bit ECC"),
        (95, "uncontained ECC"),
        (119, "GSP"),
        (120, "GSP"),
        (61, "micro-controller"),
        (62, "micro-controller"),
    ],
)
def test_xid_table_covers_common_codes(code, words):
    info = xid_info(code)
    assert words.lower() in info["meaning"].lower()
    assert info["cause"] in {"application", "consequence", "hardware", "interconnect", "driver"}


def test_xid_code_not_in_table_still_parses_without_meaning():
    f = facts("NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, something new")
    assert f["xid"] == 999
    assert "xid_meaning" not in f
    assert xid_info(999) == {}


# ----------------------------------------------------------------------- API mismatch


def test_api_mismatch_one_line():
    f = facts(
        "NVRM: API mismatch: the client has the version 535.54.03, but NVRM: this kernel module has "
        "the version 530.30.02.  Please make sure that this kernel module and all NVIDIA driver "
        "components have the same version."
    )
    assert f == {"event": "api-mismatch", "client_version": "535.54.03", "kernel_version": "530.30.02"}


def test_api_mismatch_split_over_two_lines():
    first = facts("NVRM: API mismatch: the client has the version 550.90.07, but")
    second = facts("NVRM: this kernel module has the version 545.23.08.  Please make sure that")
    assert first["event"] == second["event"] == "api-mismatch"
    assert first["client_version"] == "550.90.07" and first["kernel_version"] is None
    assert second["kernel_version"] == "545.23.08"


# ------------------------------------------------------------------ segfault and traps


def test_segfault_with_module_and_cpu():
    f = facts(
        "python3[48213]: segfault at 0 ip 00007f3a9c2b1e4d sp 00007ffd4a3b2c10 error 4 in "
        "libcustom_ops.so[7f3a9c200000+1b000] likely on CPU 3 (core 3, socket 0)"
    )
    assert f["event"] == "segfault"
    assert f["process"] == "python3"
    assert f["pid"] == 48213
    assert f["address"] == "0x0"
    assert f["ip"] == "0x7f3a9c2b1e4d"
    assert f["sp"] == "0x7ffd4a3b2c10"
    assert f["error"] == "4"
    assert f["module"] == "libcustom_ops.so"
    assert f["module_base"] == "0x7f3a9c200000"
    assert f["module_size"] == 0x1B000
    assert f["offset"] == "0xb1e4d"  # ip - base
    assert f["cpu"] == 3


def test_segfault_without_module():
    f = facts(
        "pt_main_thread[9182]: segfault at 18 ip 00007f1100a2b3c4 sp 00007f10f9ffe8a0 error 6 "
        "likely on CPU 41 (core 9, socket 1)"
    )
    assert f["event"] == "segfault"
    assert f["process"] == "pt_main_thread"
    assert f["address"] == "0x18"
    assert f["module"] is None and f["offset"] is None
    assert f["cpu"] == 41


def test_segfault_prefix_left_in_text_is_not_taken_as_process():
    f = facts(
        "Jun 30 11:07:05 host kernel: python[1234]: segfault at 7f00 ip 00007f9c1a2b3c4d "
        "sp 00007ffd12345678 error 4 in libc.so.6[7f9c1a200000+195000]"
    )
    assert f["process"] == "python"
    assert f["pid"] == 1234
    assert f["module"] == "libc.so.6"


def test_segfault_with_file_offset_printed_by_newer_kernels():
    f = facts(
        "python[2001]: segfault at 10 ip 00007f55aa1234aa sp 00007ffe00112230 error 4 in "
        "libtorch_cuda.so[3a1234aa,7f55a6e00000+5c800000] likely on CPU 0 (core 0, socket 0)"
    )
    assert f["offset"] == "0x3a1234aa"
    assert f["module_base"] == "0x7f55a6e00000"


def test_invalid_opcode_trap():
    f = facts(
        "traps: python[1234] trap invalid opcode ip:7f9c1a2b3c4d sp:7ffd12345678 error:0 in "
        "libtorch_cpu.so[7f9c10000000+1e000000]"
    )
    assert f["event"] == "invalid-opcode"
    assert f["process"] == "python"
    assert f["pid"] == 1234
    assert f["ip"] == "0x7f9c1a2b3c4d"
    assert f["sp"] == "0x7ffd12345678"
    assert f["module"] == "libtorch_cpu.so"
    assert f["module_size"] == 0x1E000000
    assert f["offset"] == "0xa2b3c4d"


def test_general_protection_trap():
    f = facts(
        "traps: python[123] general protection fault ip:7f0e8b7c4d1a sp:7ffc2f3e9c10 error:0 in "
        "libc.so.6[7f0e8b742000+195000]"
    )
    assert f["event"] == "general-protection"
    assert f["module"] == "libc.so.6"
    assert f["offset"] == hex(0x7F0E8B7C4D1A - 0x7F0E8B742000)


def test_general_protection_without_module():
    f = facts("traps: pt_data_worker[7781] general protection fault ip:7f3e21a0b6f2 sp:7f3d8bffe0a0 error:0")
    assert f["event"] == "general-protection"
    assert f["module"] is None
    assert f["offset"] is None


# ------------------------------------------------------------------------------ OOM


def test_oom_killed_global():
    f = facts(
        "Out of memory: Killed process 51234 (python) total-vm:212345678kB, anon-rss:187654321kB, "
        "file-rss:1024kB, shmem-rss:2048kB, UID:1001 pgtables:380000kB oom_score_adj:0"
    )
    assert f["event"] == "oom-kill"
    assert f["phase"] == "killed"
    assert f["pid"] == 51234
    assert f["process"] == "python"
    assert f["anon_rss_kb"] == 187654321
    assert f["total_vm_kb"] == 212345678
    assert f["uid"] == 1001
    assert f["constraint"] == "global"


def test_oom_killed_memcg():
    f = facts(
        "Memory cgroup out of memory: Killed process 3120 (pt_main_thread) total-vm:50123456kB, "
        "anon-rss:31999000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:70000kB oom_score_adj:936"
    )
    assert f["event"] == "oom-kill"
    assert f["constraint"] == "memcg"
    assert f["process"] == "pt_main_thread"
    assert f["oom_score_adj"] == 936


def test_oom_kill_constraint_line():
    f = facts(
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-4f1e.scope,"
        "mems_allowed=0-1,oom_memcg=/kubepods/burstable/pod7c1d,task_memcg=/kubepods/burstable/pod7c1d/4f1e,"
        "task=python,pid=1234,uid=0"
    )
    assert f["event"] == "oom-kill"
    assert f["phase"] == "constraint"
    assert f["constraint"] == "memcg"
    assert f["process"] == "python"
    assert f["pid"] == 1234
    assert f["task_memcg"] == "/kubepods/burstable/pod7c1d/4f1e"


def test_oom_kill_global_constraint_line():
    f = facts(
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
        "task_memcg=/user.slice/user-1000.slice/session-3.scope,task=python3,pid=880,uid=1000"
    )
    assert f["constraint"] == "global"
    assert f["pid"] == 880


def test_oom_older_kernel_select_and_reaper():
    select = facts("Out of memory: Kill process 4321 (python) score 912 or sacrifice child")
    assert select["event"] == "oom-kill" and select["phase"] == "select"
    assert select["pid"] == 4321 and select["score"] == 912
    reaped = facts("oom_reaper: reaped process 4321 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB")
    assert reaped["event"] == "oom-kill" and reaped["phase"] == "reaped"
    assert reaped["pid"] == 4321


def test_oom_invoked_names_the_invoker_not_the_victim():
    f = facts("pt_data_worker invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0")
    assert f["event"] == "oom-kill"
    assert f["phase"] == "invoked"
    assert f["invoker"] == "pt_data_worker"
    assert f["process"] is None and f["pid"] is None


# ------------------------------------------------------------------------------ AER


def test_aer_uncorrected_fatal():
    f = facts("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0")
    assert f["event"] == "aer"
    assert f["severity"] == "uncorrected-fatal"
    assert f["device"] == "0000:01:00.0"
    assert f["reporter"] == "0000:00:01.0"


def test_aer_corrected_and_multiple():
    assert facts("pcieport 0000:00:03.1: AER: Corrected error received: 0000:41:00.0")["severity"] == "corrected"
    multi = facts("pcieport 0000:00:03.1: AER: Multiple Corrected error received: 0000:00:03.1")
    assert multi["severity"] == "corrected"
    assert multi["device"] == "0000:00:03.1"


def test_aer_newer_kernel_wording():
    f = facts("pcieport 0000:80:01.1: AER: Uncorrectable (Non-Fatal) error message received from 0000:81:00.0")
    assert f["severity"] == "uncorrected-nonfatal"
    assert f["device"] == "0000:81:00.0"


def test_aer_bus_error_detail_line():
    f = facts(
        "nvidia 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), "
        "type=Transaction Layer, (Requester ID)"
    )
    assert f["event"] == "aer"
    assert f["severity"] == "uncorrected-nonfatal"
    assert f["device"] == "0000:01:00.0"
    assert f["driver"] == "nvidia"
    assert f["error_type"] == "Transaction Layer"


# ------------------------------------------------------------------------ other NVRM


def test_nvrm_rm_init_adapter_failed():
    f = facts("NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x26:0x56:1474)")
    assert f["event"] == "nvrm-other"
    assert f["detail"] == "GPU 0000:01:00.0: RmInitAdapter failed! (0x26:0x56:1474)"
    assert f["pci"] == "0000:01:00.0"


def test_nvrm_fallen_off_the_bus_with_uuid():
    f = facts("NVRM: GPU at PCI:0000:65:00: GPU-3e5b7c2a-91d0-4f6e-8a1b-2c3d4e5f6a7b has fallen off the bus")
    assert f["event"] == "nvrm-other"
    assert f["pci"] == "0000:65:00"
    assert f["gpu_uuid"] == "GPU-3e5b7c2a-91d0-4f6e-8a1b-2c3d4e5f6a7b"
    assert f["fallen_off_bus"] is True


def test_evidence_keeps_location():
    ev = parse_kernel(kline("NVRM: Xid (PCI:0000:01:00): 48, pid=77, name=python, An uncorrectable double bit error", 42))
    assert ev is not None
    assert ev.loc == Loc("dmesg.log", 42)
    assert ev.facts["xid"] == 48


# ---------------------------------------------------------------------------- negatives


@pytest.mark.parametrize(
    "text",
    [
        "",
        "killed = 0",
        "Epoch 3: loss=0.12 Xid count 0",
        "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
        "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "print('segfault at 0 ip')",
        "pcieport 0000:00:01.0: AER: enabled with IRQ 24",
        "nvidia 0000:01:00.0: AER:   device [10de:2330] error status/mask=00004000/00000000",
        "Killed",
    ],
)
def test_not_kernel_records(text):
    assert parse_kernel(kline(text)) is None
