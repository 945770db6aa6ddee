"""parse_environment: environment facts from whatever a job printed."""

from __future__ import annotations

import json

import pytest

from crashlens.model import Line, Loc
from crashlens.parsers.environment import gpu_compute_capability, parse_environment


def lines_of(text: str, source: str = "env.txt") -> list[Line]:
    return [Line(loc=Loc(source, i), text=t) for i, t in enumerate(text.splitlines(), start=1)]


def env_of(text: str) -> dict:
    env, _ = parse_environment(lines_of(text))
    json.dumps(env)  # must stay JSON-serialisable
    return env


COLLECT_ENV = """\
Collecting environment information...
PyTorch version: 2.3.1+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Clang version: Could not collect
CMake version: version 3.29.2
Libc version: glibc-2.35

Python version: 3.10.14 (main, Apr  6 2024, 18:45:05) [GCC 11.4.0] (64-bit runtime)
Python platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35
Is CUDA available: True
CUDA runtime version: 12.4.131
CUDA_MODULE_LOADING set to: LAZY
GPU models and configuration: 
GPU 0: NVIDIA A100-SXM4-80GB
GPU 1: NVIDIA A100-SXM4-80GB

Nvidia driver version: 550.54.15
cuDNN version: Probably one of the following:
/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7
/usr/lib/x86_64-linux-gnu/libcudnn_adv_infer.so.8.9.7
HIP runtime version: N/A
MIOpen runtime version: N/A
Is XNNPACK available: True

CPU:
Architecture:                         x86_64
CPU op-mode(s):                       32-bit, 64-bit
Vendor ID:                            AuthenticAMD
Model name:                           AMD EPYC 7713 64-Core Processor
Flags:                                fpu vme de pse tsc msr pae mce cx8 apic sep mtrr avx avx2 sse4_1 sse4_2 fma

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] nvidia-cudnn-cu12==8.9.2.26
[pip3] nvidia-nccl-cu12==2.20.5
[pip3] torch==2.3.1
[pip3] triton==2.3.1
[conda] numpy                     1.26.4                   pypi_0    pypi
"""


def test_collect_env():
    env, evidence = parse_environment(lines_of(COLLECT_ENV))
    assert env["framework"] == {"torch": "2.3.1+cu121"}
    assert env["cuda_runtime"] == "12.1"  # what PyTorch was built with, not the system's 12.4
    assert env["driver_version"] == "550.54.15"
    assert env["cudnn"] == "8.9.7"
    assert env["python"] == "3.10.14"
    assert env["os"] == "Ubuntu 22.04.4 LTS (x86_64)"
    assert env["cpu_model"] == "AMD EPYC 7713 64-Core Processor"
    assert "avx2" in env["cpu_flags"] and "avx512f" not in env["cpu_flags"]
    assert env["cpu_flags"] == sorted(env["cpu_flags"])
    assert env["packages"]["numpy"] == "1.26.4"
    assert env["packages"]["nvidia-nccl-cu12"] == "2.20.5"
    assert env["packages"]["triton"] == "2.3.1"
    assert env["gpus"] == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "sm": "sm_80"},
        {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "sm": "sm_80"},
    ]
    assert env["cuda_toolkit"] == "12.4"  # collect_env's "CUDA runtime version" is the system nvcc
    assert "cuda_driver" not in env  # collect_env does not print it
    # evidence: one per fact, pointing at the line that said it
    by_key = {e.facts["key"]: e for e in evidence}
    driver_line = COLLECT_ENV.splitlines().index("Nvidia driver version: 550.54.15") + 1
    assert by_key["driver_version"].loc == Loc("env.txt", driver_line)
    assert by_key["driver_version"].text == "Nvidia driver version: 550.54.15"
    assert by_key["framework.torch"].facts["value"] == "2.3.1+cu121"
    assert all(e.kind == "env" for e in evidence)


NVIDIA_SMI = """\
Tue Feb 11 04:00:01 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   31C    P0             77W /  700W |       0MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA H200                    On  |   00000000:00:07.0 Off |                    0 |
| N/A   30C    P0             76W /  700W |       0MiB / 143771MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A           41211      C   python                                  512MiB |
+-----------------------------------------------------------------------------------------+
"""


def test_nvidia_smi_table():
    env = env_of(NVIDIA_SMI)
    assert env["driver_version"] == "580.159.04"
    assert env["cuda_driver"] == "13.0"
    assert "cuda_runtime" not in env
    assert env["gpus"] == [
        {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90",
         "pci_bus_id": "00000000:00:06.0"},
        {"index": 1, "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90",
         "pci_bus_id": "00000000:00:07.0"},
    ]


def test_nvidia_smi_old_table_truncated_name_then_full_name():
    env = env_of(
        "| NVIDIA-SMI 470.182.03   Driver Version: 470.182.03   CUDA Version: 11.4     |\n"
        "|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |\n"
        "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-6f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f)\n"
    )
    assert env["cuda_driver"] == "11.4"
    assert env["gpus"] == [
        {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0", "sm": "sm_70",
         "pci_bus_id": "00000000:00:1E.0"}
    ]


def test_nvidia_smi_query():
    env = env_of(
        "==============NVSMI LOG==============\n"
        "Timestamp                                 : Tue Feb 11 04:00:01 2025\n"
        "Driver Version                            : 535.183.01\n"
        "CUDA Version                              : 12.2\n"
        "Attached GPUs                             : 1\n"
        "GPU 00000000:18:00.0\n"
        "    Product Name                          : NVIDIA H100 80GB HBM3\n"
        "    Product Brand                         : NVIDIA\n"
    )
    assert env["driver_version"] == "535.183.01"
    assert env["cuda_driver"] == "12.2"
    assert env["gpus"] == [{"index": None, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm": "sm_90"}]


def test_free_form_training_script_line():
    env = env_of("torch 2.11.0+cu130 cuda 13.0 device NVIDIA H200")
    assert env["framework"] == {"torch": "2.11.0+cu130"}
    assert env["cuda_runtime"] == "13.0"
    assert env["gpus"] == [{"index": None, "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90"}]


def test_device_with_compute_capability_line():
    env = env_of("device 0: NVIDIA H200, compute capability 9.0")
    assert env["gpus"] == [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90"}]


def test_same_gpu_from_two_sources_is_merged():
    env = env_of(
        "|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |\n"
        "device 0: NVIDIA H200, compute capability 9.0\n"
    )
    assert len(env["gpus"]) == 1
    assert env["gpus"][0]["pci_bus_id"] == "00000000:00:06.0"
    assert env["gpus"][0]["compute_capability"] == "9.0"


def test_pytorch_incompatible_gpu_warning():
    env = env_of(
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:230: UserWarning: \n"
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
    )
    assert env["gpus"] == [
        {"index": None, "name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0", "sm": "sm_120"}
    ]
    assert env["torch_arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def test_too_old_gpu_message():
    env = env_of(
        "Found GPU0 GeForce 820M which is of cuda capability 2.1.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n"
    )
    assert env["gpus"] == [{"index": 0, "name": "GeForce 820M", "compute_capability": "2.1", "sm": "sm_21"}]


def test_tensorflow_device_and_cudnn():
    env = env_of(
        "2025-02-11 04:00:01.123456: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1928] Created device "
        "/job:localhost/replica:0/task:0/device:GPU:0 with 14626 MB memory:  -> device: 0, name: Tesla "
        "V100-SXM2-16GB, pci bus id: 0000:00:1e.0, compute capability: 7.0\n"
        "2025-02-11 04:00:05.000001: I external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:465] "
        "Loaded cuDNN version 8906\n"
        "TensorFlow version: 2.15.1\n"
    )
    assert env["gpus"] == [
        {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0", "sm": "sm_70",
         "pci_bus_id": "0000:00:1e.0"}
    ]
    assert env["cudnn"] == "8.9.6"
    assert env["framework"] == {"tensorflow": "2.15.1"}


def test_cudnn_9_integer_version():
    assert env_of("Loaded cuDNN version 90100")["cudnn"] == "9.1.0"


def test_jax_environment_info():
    env = env_of(
        "jax:    0.4.30\n"
        "jaxlib: 0.4.30\n"
        "numpy:  1.26.4\n"
        "python: 3.11.9 (main, Apr 19 2024, 16:48:06) [GCC 11.2.0]\n"
        "jax.devices (1 total, 1 local): [cuda(id=0)]\n"
        "I0211 04:00:01.000000 service.cc:145] XLA service 0x55d5 initialized for platform CUDA\n"
        "I0211 04:00:01.000001 service.cc:153]   StreamExecutor device (0): NVIDIA A100-SXM4-40GB, Compute Capability 8.0\n"
    )
    assert env["framework"] == {"jax": "0.4.30"}
    assert env["packages"]["jaxlib"] == "0.4.30"
    assert env["packages"]["numpy"] == "1.26.4"
    assert env["python"] == "3.11.9"
    assert env["gpus"] == [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "sm": "sm_80"}]


def test_pip_list_and_freeze():
    env = env_of(
        "Package                  Version\n"
        "------------------------ ------------\n"
        "accelerate               0.30.1\n"
        "flash_attn               2.5.9.post1\n"
        "numpy                    1.26.4\n"
        "nvidia-cublas-cu12       12.1.3.1\n"
        "nvidia-cuda-runtime-cu12 12.1.105\n"
        "requests                 2.32.3\n"
        "torch                    2.3.0\n"
        "transformers             4.41.2\n"
        "vllm==0.4.3\n"
        "xformers==0.0.26.post1\n"
        "pytorch-lightning==2.2.5\n"
        "onnxruntime-gpu==1.18.0\n"
        "cupy-cuda12x==13.1.0\n"
    )
    pkgs = env["packages"]
    assert pkgs["flash-attn"] == "2.5.9.post1"
    assert pkgs["nvidia-cublas-cu12"] == "12.1.3.1"
    assert pkgs["vllm"] == "0.4.3"
    assert pkgs["xformers"] == "0.0.26.post1"
    assert pkgs["pytorch-lightning"] == "2.2.5"
    assert pkgs["onnxruntime-gpu"] == "1.18.0"
    assert pkgs["cupy-cuda12x"] == "13.1.0"
    assert pkgs["accelerate"] == "0.30.1"
    assert "requests" not in pkgs  # not one of the packages that matter
    assert env["framework"] == {"torch": "2.3.0"}
    assert env["cuda_runtime"] == "12.1"  # from nvidia-cuda-runtime-cu12, for lack of anything better


def test_conda_list():
    env = env_of(
        "# Name                    Version                   Build  Channel\n"
        "pytorch                   2.1.2           py3.10_cuda11.8_cudnn8.7.0_0    pytorch\n"
        "pytorch-cuda              11.8                 h7e8668a_5    pytorch\n"
        "tensorflow                2.13.0          cuda118py310h6a5f9c3_1    conda-forge\n"
    )
    assert env["framework"] == {"tensorflow": "2.13.0", "torch": "2.1.2"}
    assert env["packages"]["torch"] == "2.1.2"
    assert env["cuda_runtime"] == "11.8"


def test_pip_install_output():
    env = env_of(
        "Requirement already satisfied: numpy>=1.22 in /opt/conda/lib/python3.10/site-packages (from torch) (1.26.4)\n"
        "Successfully installed nvidia-cudnn-cu12-9.1.0.70 torch-2.4.0 triton-3.0.0 sympy-1.13.1\n"
        "torchvision 0.17.0 requires torch==2.2.0, but you have torch 2.4.0 which is incompatible.\n"
    )
    assert env["packages"]["numpy"] == "1.26.4"
    assert env["packages"]["nvidia-cudnn-cu12"] == "9.1.0.70"
    assert env["packages"]["torch"] == "2.4.0"
    assert env["packages"]["triton"] == "3.0.0"
    assert "sympy" not in env["packages"]
    assert env["framework"]["torch"] == "2.4.0"  # never the 2.2.0 that torchvision wanted
    assert env["cudnn"] == "9.1.0"


def test_nccl_and_device_query():
    env = env_of(
        "gpu-a017:5150:5150 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        '  Device 0: "NVIDIA A100-SXM4-40GB"\n'
        "  CUDA Driver Version / Runtime Version          12.4 / 12.1\n"
        "  CUDA Capability Major/Minor version number:    8.0\n"
    )
    assert env["packages"]["nccl"] == "2.21.5"
    assert env["cuda_driver"] == "12.4"
    assert env["cuda_runtime"] == "12.1"
    assert env["gpus"] == [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "sm": "sm_80"}]


def test_lscpu_and_proc_cpuinfo():
    lscpu = env_of(
        "Architecture:            x86_64\n"
        "  Model name:            Intel(R) Xeon(R) Platinum 8480+\n"
        "    Flags:               fpu vme de pse tsc avx512f avx512_bf16 amx_tile amx_bf16\n"
    )
    assert lscpu["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert "amx_tile" in lscpu["cpu_flags"]

    cpuinfo = env_of(
        "processor\t: 0\n"
        "model name\t: Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz\n"
        "flags\t\t: fpu vme de pse tsc msr avx avx2 fma\n"
        "processor\t: 1\n"
        "model name\t: Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz\n"
        "flags\t\t: fpu vme de pse tsc msr avx avx2 fma\n"
    )
    assert cpuinfo["cpu_model"] == "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz"
    assert cpuinfo["cpu_flags"] == ["avx", "avx2", "de", "fma", "fpu", "msr", "pse", "tsc", "vme"]
    assert "avx512f" not in cpuinfo["cpu_flags"]


def test_repeated_lines_give_evidence_once():
    text = "flags\t\t: fpu vme de pse tsc msr avx avx2\n" * 64
    env, evidence = parse_environment(lines_of(text))
    assert [e.facts["key"] for e in evidence] == ["cpu_flags"]
    assert evidence[0].loc == Loc("env.txt", 1)


def test_arm_cpuinfo_features():
    env = env_of("Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve sve2\n")
    assert "sve2" in env["cpu_flags"]


def test_driver_version_from_proc_and_dmesg():
    env = env_of("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)")
    assert env["driver_version"] == "570.124.06"


def test_nvcc_version_is_the_toolkit_and_only_a_fallback_runtime():
    env = env_of(
        "Cuda compilation tools, release 12.4, V12.4.131\n"
        "torch.version.cuda: 12.1\n"
    )
    assert env["cuda_toolkit"] == "12.4"
    assert env["cuda_runtime"] == "12.1"
    alone = env_of("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 11.6, V11.6.124\n")
    assert alone["cuda_toolkit"] == "11.6"
    assert alone["cuda_runtime"] == "11.6"


def test_torch_extension_cuda_mismatch_message():
    env = env_of(
        "The detected CUDA version (11.7) mismatches the version that was used to compile\n"
        "PyTorch (12.1). Please make sure to use the same CUDA versions.\n"
    )
    assert env["cuda_toolkit"] == "11.7"
    assert env["cuda_runtime"] == "12.1"


def test_cudnn_incompatibility_message():
    env = env_of(
        "RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (8, 9, 2) but linked "
        "against (8, 6, 0)"
    )
    assert env["cudnn"] == "8.6.0"
    assert env["cudnn_built"] == "8.9.2"
    other = env_of(
        "ERROR Could not load torch: cuDNN version incompatibility: PyTorch was compiled  against "
        "(9, 1, 0) but found runtime version (8, 9, 7). PyTorch already comes bundled with cuDNN."
    )
    assert other["cudnn"] == "8.9.7" and other["cudnn_built"] == "9.1.0"


def test_glibc_version():
    assert env_of("Libc version: glibc-2.31")["glibc"] == "2.31"
    assert env_of("ldd (GNU libc) 2.17")["glibc"] == "2.17"
    assert env_of("ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35")["glibc"] == "2.35"


def test_transformers_cli_env():
    env = env_of(
        "- `transformers` version: 4.44.2\n"
        "- Platform: Linux-6.5.0-1024-aws-x86_64-with-glibc2.35\n"
        "- Python version: 3.10.12\n"
        "- PyTorch version (GPU?): 2.4.1+cu124 (True)\n"
        "- Tensorflow version (GPU?): not installed (NA)\n"
    )
    assert env["packages"]["transformers"] == "4.44.2"
    assert env["python"] == "3.10.12"
    assert env["framework"] == {"torch": "2.4.1+cu124"}
    assert env["cuda_runtime"] == "12.4"


def test_os_release():
    assert env_of('PRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"')["os"] == "Rocky Linux 9.3 (Blue Onyx)"
    assert env_of('NAME="CentOS Linux"\nVERSION="7 (Core)"\n')["os"] == "CentOS Linux 7 (Core)"
    both = env_of('NAME="Ubuntu"\nVERSION="22.04.4 LTS (Jammy Jellyfish)"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    assert both["os"] == "Ubuntu 22.04.4 LTS"
    assert "os_name" not in both and "os_version" not in both


@pytest.mark.parametrize(
    "name, cc",
    [
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA A10G", "8.6"),
        ("NVIDIA A10", "8.6"),
        ("Tesla T4", "7.5"),
        ("Tesla K80", "3.7"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GB200", "10.0"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 3090", "8.6"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA RTX A6000", "8.6"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA TITAN X (Pascal)", "6.1"),
        ("GeForce GTX TITAN X", "5.2"),
        ("NVIDIA Tegra X1", "5.3"),
        ("Orin", "8.7"),
        ("Xavier", "7.2"),
        ("NVIDIA Jetson AGX Orin", "8.7"),
        ("GeForce 820M", "2.1"),
        ("NVIDIA GB10", "12.1"),
    ],
)
def test_gpu_table(name, cc):
    assert gpu_compute_capability(name) == cc


def test_gpu_table_unknown_name():
    assert gpu_compute_capability("Matrox G200eR2") is None
    env = env_of("GPU 0: NVIDIA Mystery Board 9000")
    assert env["gpus"] == [{"index": 0, "name": "NVIDIA Mystery Board 9000"}]


# ---------------------------------------------------------------------------- negatives


def test_nothing_found_gives_empty_dict():
    env, evidence = parse_environment(
        lines_of(
            "Epoch 3:  41%|████      | 205/500 [01:23<02:00,  2.45it/s, loss=0.231]\n"
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.15 GiB of which 1.20 GiB is free.\n"
            '  File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1532, in _wrapped_call_impl\n'
            "Product Name: PowerEdge R760xa\n"
            "Flags: 0x2\n"
            "requests 2.32.3\n"
            "epoch 12 step 400\n"
            "GPU 0: 97% util, 61C\n"
            "|    0   N/A  N/A     41211      C   python                                  512MiB |\n"
        )
    )
    assert env == {}
    assert evidence == []


def test_collecting_requirement_is_not_installed_version():
    env = env_of("Collecting torch==2.2.0\n")
    assert "framework" not in env
