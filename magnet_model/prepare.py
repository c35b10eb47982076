"""`python -m magnet_model.prepare`: check every offline asset, warm the model cache.

Run once at image build time (Dockerfile) or by hand; prints where each asset comes from
and how long the embedded model took to load.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import assets
from .errors import MagnetError
from .loading import load_base
from .settings import ModelSpec, add_model_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_model_args(parser)
    args = parser.parse_args(argv)
    try:
        for name, fn in [
            ("embedded base model", assets.smollm2_gguf),
            ("sentence encoder", assets.minilm_dir),
            ("Wikipedia articles", assets.wikipedia_bz2),
            ("Lee news corpus", assets.lee_background),
            ("Lee rated documents", assets.lee_rated),
            ("Lee ratings", assets.lee_ratings),
            ("convention speeches", assets.convention_speeches),
            ("STS-B test", lambda: assets.sts_b("test")),
            ("CoNLL-2003 train", lambda: assets.conll2003("train")),
        ]:
            print(f"{name:22s} {fn()}")
        spec = ModelSpec.from_args(args)
        start = time.perf_counter()
        _, _, source = load_base(spec)
        print(f"{'base model':22s} {source} ({time.perf_counter() - start:.1f} s)")
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
