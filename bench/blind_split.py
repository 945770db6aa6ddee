"""The blind part of the grown shared corpus (issue 9): a fixed-seed random 30 % of the cases
added after the first 53, set aside before any rule was written against them.

    python bench/blind_split.py ../shared/corpus            # names of the blind part
    python bench/blind_split.py ../shared/corpus --link DIR # a corpus folder of links to them
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

SEED = 20261126
FIRST_NEW = 54  # cases 001-053 were the development set before it grew


def blind_part(corpus: Path) -> list[Path]:
    root = corpus / "cases" if (corpus / "cases").is_dir() else corpus
    new = sorted(p for p in root.iterdir() if (p / "case.yaml").is_file() and int(p.name[:3]) >= FIRST_NEW)
    k = round(len(new) * 0.3)
    return sorted(random.Random(SEED).sample(new, k))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--link", type=Path)
    args = ap.parse_args()
    part = blind_part(args.corpus)
    if args.link:
        (args.link / "cases").mkdir(parents=True, exist_ok=True)
        for p in part:
            dst = args.link / "cases" / p.name
            if not dst.exists():
                dst.symlink_to(p.resolve())
    for p in part:
        print(p.name)


if __name__ == "__main__":
    main()
