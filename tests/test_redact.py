"""report/redact.py: every kind of secret, the optional personal data, and what must not be touched."""

from __future__ import annotations

import pytest

from crashlens.report.redact import Redactor, redact, shareable, summary

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
GHP = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WANDB = "0123456789abcdef0123456789abcdef01234567"

# (kind, text, the secret that must go, what the redacted text must contain)
POSITIVE = [
    ("hf-token", f"HF_TOKEN={HF}", HF, "HF_TOKEN=hf_<redacted>"),
    ("hf-token", f"login(token='{HF}')", HF, "hf_<redacted>"),
    ("github-token", f"export GITHUB_TOKEN={GHP}", GHP, "ghp_<redacted>"),
    ("github-token", "gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 and ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
     "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "gho_<redacted> and ghs_<redacted>"),
    ("github-token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW",
     "11ABCDEFG0123456789", "github_pat_<redacted>"),
    ("github-token", "git clone https://x-access-token:v1.abc123def456@github.com/o/r.git", "v1.abc123def456",
     "https://x-access-token:<redacted>@github.com/o/r.git"),
    ("github-token", "remote: x-access-token:v1.abc123def456@github.com", "v1.abc123def456",
     "x-access-token:<redacted>@github.com"),
    ("url-credential", "pip install --index-url https://alice:s3cretPass@pypi.example.com/simple torch", "s3cretPass",
     "https://alice:<redacted>@pypi.example.com"),
    ("url-credential", "DATABASE=postgresql://svc:pa55word@db:5432/runs", "pa55word", "postgresql://svc:<redacted>@db"),
    ("wandb-key", f"WANDB_API_KEY={WANDB}", WANDB, "WANDB_API_KEY=<redacted>"),
    ("wandb-key", f"$ wandb login {WANDB}", WANDB, "wandb login <redacted>"),
    ("wandb-key", f"$ wandb login --relogin {WANDB}", WANDB, "wandb login --relogin <redacted>"),
    ("aws-key-id", f"aws_access_key_id = {AWS_ID}", AWS_ID, "AKIA<redacted>"),
    ("aws-key-id", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "ASIA<redacted>"),
    ("aws-secret", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = <redacted>"),
    ("aws-secret", f"{AWS_ID} {AWS_SECRET}", AWS_SECRET, "AKIA<redacted> <redacted>"),
    ("aws-secret", f"[default]\nkey id {AWS_ID}\nsecret {AWS_SECRET}\n", AWS_SECRET, "secret <redacted>"),
    ("openai-key", "OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abc", "AbCdEfGhIjKlMnOpQrSt",
     "sk-proj-<redacted>"),
    ("openai-key", 'OpenAI(api_key="sk-AbCdEfGhIjKlMnOpQrSt3BlbkFJ0123456789abcd")', "AbCdEfGhIjKlMnOpQrSt",
     'api_key="sk-<redacted>"'),
    ("anthropic-key", "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdEF",
     "AbCdEfGhIjKlMnOpQrSt", "sk-ant-<redacted>"),
    ("slack-token", "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "123456789012",
     "xoxb-<redacted>"),
    ("slack-token", "xoxp-123456789012-1234567890123", "123456789012", "xoxp-<redacted>"),
    ("secret", "DB_PASSWORD=hunter2hunter2", "hunter2hunter2", "DB_PASSWORD=<redacted>"),
    ("secret", "MY_SERVICE_TOKEN='abc123xyz'", "abc123xyz", "MY_SERVICE_TOKEN='<redacted>'"),
    ("secret", "export CLIENT_SECRET=\"s3cr3t value\"", "s3cr3t value", 'CLIENT_SECRET="<redacted>"'),
    ("stripe-key", "STRIPE_KEY=rk_live_abcdef123", "abcdef123", "STRIPE_KEY=rk_live_<redacted>"),
    ("secret", "password=hunter2", "hunter2", "password=<redacted>"),
    ("secret", "passwd: opensesame", "opensesame", "passwd: <redacted>"),
    ("secret", "  db_password: correct-horse", "correct-horse", "db_password: <redacted>"),
    ("secret", "python train.py --token abc123secret --lr 1e-3", "abc123secret", "--token <redacted> --lr 1e-3"),
    ("secret", "python train.py --hf-token=xyz987value --api-key k3y-v4lue", "xyz987value",
     "--hf-token=<redacted> --api-key <redacted>"),
    ("secret", '{"api_key": "abcdef123456", "model": "x"}', "abcdef123456", '"api_key": "<redacted>", "model": "x"'),
    ("secret", "{'access_token': 'abcdef123456'}", "abcdef123456", "'access_token': '<redacted>'"),
    ("secret", "GET /v1/models?api_key=abcdef123456&x=1", "abcdef123456", "api_key=<redacted>&x=1"),
    ("secret", "machine api.example.com login bob password pA55w0rd", "pA55w0rd", "password <redacted>"),
    ("auth-header", 'curl -H "Authorization: Bearer abcdefghijklmnop1234567890" https://api', "abcdefghijklmnop",
     "Authorization: Bearer <redacted>"),
    ("auth-header", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA", "Authorization: Basic <redacted>"),
    ("auth-header", "headers={'authorization': 'token 0123456789abcdef'}", "0123456789abcdef", "token <redacted>"),
    ("auth-header", "sent Bearer AbCdEf0123456789XyZ to the proxy", "AbCdEf0123456789XyZ", "Bearer <redacted>"),
    ("jwt", "cookie=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "dozjgNryP4J3jVmNHl0w5N", "eyJ<redacted>"),
]


@pytest.mark.parametrize("kind,text,secret,expect", POSITIVE, ids=[f"{p[0]}-{i}" for i, p in enumerate(POSITIVE)])
def test_each_kind_is_redacted(kind: str, text: str, secret: str, expect: str):
    out, counts = redact(text)
    assert secret not in out, out
    assert expect in out, out
    assert counts.get(kind, 0) >= 1, counts
    assert out.count("\n") == text.count("\n")  # line structure kept


def test_pem_private_key_block_keeps_lines():
    text = ("before\n-----BEGIN RSA PRIVATE KEY-----\n"
            "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MmhQfRb0vOyA3fEf\n"
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABFwAAAAdzc2gtcn\n"
            "-----END RSA PRIVATE KEY-----\nafter\n")
    out, counts = redact(text)
    assert "MIIE" not in out and "b3Bl" not in out
    assert out.splitlines() == ["before", "-----BEGIN RSA PRIVATE KEY-----", "<redacted>", "<redacted>",
                                "-----END RSA PRIVATE KEY-----", "after"]
    assert counts == {"private-key": 1}


def test_pem_variants():
    # OpenSSH, escaped newlines inside JSON (a service-account file), cut off by a truncated log
    ssh = "-----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----"
    out, _ = redact(ssh)
    assert "b3Bl" not in out and out.splitlines()[1] == "  <redacted>"
    js = '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n",'
    out, counts = redact(js)
    assert "MIIEvQ" not in out and "\\n<redacted>\\n-----END PRIVATE KEY-----" in out and counts == {"private-key": 1}
    cut = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oo3vOlYvFhmVoAoGCCqGSM49\nAwEHoUQDQgAE\n"
    out, counts = redact(cut + "Traceback (most recent call last):\n")
    assert "MHcC" not in out and "AwEH" not in out and "Traceback (most recent call last):" in out
    assert counts == {"private-key": 1}


NEGATIVE = [
    "commit 3f1c2a9b8e7d6c5b4a3928170f6e5d4c3b2a1908 (HEAD -> main)",
    "Build ID: 0123456789abcdef0123456789abcdef01234567",
    "fault at 0x7f3a2b1c4d5e ip 00007fffdeadbeef sp 00007ffe4d1e9be0 error 14 in libcuda.so.1[7f3a2b000000+1a00000]",
    "CUDA error: an illegal memory access was encountered at 0x00007f5a3c000000",
    "pip install scikit-learn sk-learn==0.0 && import sklearn",
    "This archive is password-protected; enter the password protected by the vault.",
    "password-protected: true",
    "TOKENIZERS_PARALLELISM=false max_tokens=512 max_new_tokens=128",
    "pad_token=<pad> eos_token='</s>' \"bos_token\": \"<s>\" unk_token: [UNK]",
    "sorted(x, key=lambda v: v) key=len cache_key=abc123 sort_key: name",
    "ValueError: Invalid token: expected ']' ; Token: 5 ; Key: 3",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
    "the bearer of bad news; Basic usage; Authorization: required",
    "hf_hub_download(repo_id='x') ghp_short sk-1234",
    "memcpy@GLIBC_2.14 torch@2.1.0 git@github.com:org/repo.git",
    "token=self.token password=os.environ['PW'] api_key=$OPENAI_API_KEY HF_TOKEN=${{ secrets.HF_TOKEN }}",
    "GPU 0: NVIDIA H100 (UUID: GPU-5a3c1d2e-7f8b-4c9d-a0e1-f2a3b4c5d6e7)",
    "nvcr.io/nvidia/pytorch:24.01-py3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "--key-file /etc/ssl/x.key --password-file /run/secrets/pw --ssh-key ~/.ssh/id_ed25519.pub",
    "http://localhost:8080/v1 and ssh://git@example.com:22/repo",
    "API_KEY=<redacted> HF_TOKEN=hf_<redacted> password=*** secret: null api_key: ''",
    "num_key_value_heads: 8  key_value_cache: true  monkey=3",
    "Process 48211 has 77.60 GiB memory in use; NCCL version 2.21.5+cuda12.4",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_no_false_positives(text: str):
    out, counts = redact(text, emails=True, home_users=True, hostnames=True)
    assert out == text and counts == {}


def test_optional_kinds_are_off_by_default_and_on_when_asked():
    text = ("contact alice.smith@example.com\n"
            '  File "/home/alice/proj/train.py", line 3, in <module>\n'
            "C:\\Users\\bob\\proj\\x.py and /Users/carol/venv/lib\n"
            "USER=alice\n"
            "Nov 20 03:02:11 gpu-node-07 kernel: NVRM: Xid 79\n"
            "  host      : gpu-node-07.cluster.local\n"
            "gpu-node-07:48211:48211 [0] NCCL INFO Bootstrap\n"
            "ssh gpu-node-07 nvidia-smi\n")
    out, counts = redact(text)
    assert out == text and counts == {}
    out, counts = redact(text, emails=True, home_users=True, hostnames=True)
    for gone in ("alice", "bob", "carol", "gpu-node-07", "example.com"):
        assert gone not in out, (gone, out)
    assert "<email>" in out and "/home/<user>/proj" in out and "C:\\Users\\<user>\\proj" in out
    assert "/Users/<user>/venv" in out and "USER=<user>" in out
    assert "<host> kernel: NVRM" in out and "host      : <host>" in out and "ssh <host> nvidia-smi" in out
    # distinct items: alice appears three times, the host in its short and long forms
    assert counts == {"email": 1, "home-user": 3, "hostname": 1}
    assert out.count("\n") == text.count("\n")


def test_explicit_hostnames_and_extra_strings():
    out, counts = redact("ran on dgx-a100-12 for project-nebula (dgx-a100-12.corp)", hostnames=["dgx-a100-12.corp"],
                         extra=["project-nebula"])
    assert out == "ran on <host> for <redacted> (<host>)"
    assert counts == {"hostname": 1, "custom": 1}


def test_idempotent_and_counts_distinct():
    text = "\n".join(p[1] for p in POSITIVE) + "\ncontact alice@example.com from /home/alice\n"
    once, counts = redact(text, emails=True, home_users=True)
    twice, again = redact(once, emails=True, home_users=True)
    assert twice == once and again == {}
    assert once.count("\n") == text.count("\n")
    # the same token twice is one item
    _, c = redact(f"{HF} and again {HF}")
    assert c == {"hf-token": 1}


def test_secret_cut_short_by_a_renderer():
    out, counts = redact(f"token {HF[:14]}… and {GHP[:12]}... (sk-learn... stays)")
    assert HF[3:14] not in out and GHP[4:12] not in out and "sk-learn..." in out
    assert counts == {"hf-token": 1, "github-token": 1}


def test_redactor_over_several_texts():
    r = Redactor(hostnames=True)
    r.learn("Nov 20 03:02:11 node-a17 kernel: x")
    assert r.redact("connect to node-a17 failed") == "connect to <host> failed"
    assert r.redact(f"{HF}") == "hf_<redacted>" and r.redact(f"x {HF}") == "x hf_<redacted>"
    assert r.counts == {"hostname": 1, "hf-token": 1}
    assert r.summary() == "crashlens redacted 2 items: 1 hf token, 1 host name"


def test_summary_and_shareable():
    assert summary({"hf-token": 2, "email": 1}) == "crashlens redacted 3 items: 2 hf tokens, 1 e-mail"
    assert summary({}) == "crashlens redacted no items (no secrets found)"
    md = f"# report\n\nHF_TOKEN={HF}\n"
    out = shareable(md)
    assert HF not in out and out.endswith("crashlens redacted 1 item: 1 hf token")
    assert shareable(md, False) == md
