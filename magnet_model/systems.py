"""The systems the app and the evaluator compare, and the title each is shown under.

A system's name is what CLIs, settings and stored results use: an adapter's name ("magnet",
"llm2vec"), "base" (no adapter), the prompted baselines of the base model ("zero-shot",
"five-shot") and the sentence-encoder baseline ("minilm"). TITLES is how people read them
(the app's headings, the evaluator's table for the sentence encoder).
"""

from __future__ import annotations

MINILM = "minilm"  # the sentence-encoder baseline (all-MiniLM-L6-v2)

TITLES = {
    "magnet": "MAGNET",
    "zero-shot": "Base, zero-shot prompt",
    "five-shot": "Base, five-shot prompt",
    "base": "Base model",
    "llm2vec": "LLM2Vec-style",
    MINILM: "all-MiniLM-L6-v2",
}
