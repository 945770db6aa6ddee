"""Advice that fits the evidence (engine/advice.py, data/advice.yaml): no remedy the run already
followed, none for a situation the inputs do not show, and the reasoning says what was left out."""

from __future__ import annotations

from crashlens.pipeline import analyze_text

KEYERROR = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    x = cfg["lr"]\n'
            "KeyError: 'lr'\n")


def _remedies(text: str) -> tuple[tuple[str, ...], str]:
    a = analyze_text(text)
    return a.causes[0].remedies, " ".join(a.causes[0].reasoning)


def test_num_workers_advice_only_for_worker_errors():
    remedies, why = _remedies(KEYERROR)
    assert not any("num_workers" in r for r in remedies) and "do not show the situation" in why
    worker = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    for b in loader:\n"
              "KeyError: Caught KeyError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
              '  File "data.py", line 12, in __getitem__\n    return self.rows[i]["text"]\nKeyError: \'text\'\n')
    remedies, _ = _remedies(worker)
    assert any("num_workers" in r for r in remedies)


def test_anomaly_mode_is_not_advised_to_a_run_that_had_it_on():
    log = ("[W python_anomaly_mode.cpp:104] Warning: Error detected in LogBackward0. Traceback of forward call that caused the error:\n"
           '  File "train.py", line 40, in step\n    loss = torch.log(p).mean()\n'
           "Traceback (most recent call last):\n  File \"train.py\", line 52, in <module>\n    loss.backward()\n"
           "RuntimeError: Function 'LogBackward0' returned nan values in its 0th output.\n")
    remedies, why = _remedies(log)
    assert not any("detect_anomaly" in r for r in remedies) and "already did it" in why
    assert not any("Stable Diffusion" in r for r in remedies) and remedies


def test_cuda_launch_blocking_hint_in_the_log_is_not_a_setting():
    hint = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")
    remedies, _ = _remedies(hint)
    assert any("CUDA_LAUNCH_BLOCKING=1" in r for r in remedies)
    remedies, why = _remedies("+ CUDA_LAUNCH_BLOCKING=1 python train.py\n" + hint)
    assert not any("CUDA_LAUNCH_BLOCKING=1" in r for r in remedies) and "already did it" in why
