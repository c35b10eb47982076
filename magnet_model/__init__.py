"""The MAGNET model library (torch + transformers + peft; no Gradio, no SQL).

Inference is layered, each file one idea, imports pointing down only:

    engine.py      the public facade (infill, compare_*, continue_text, generate, embed_*)
    infill.py      MAGNET span decoding lanes       prompted.py    zero/N-shot baselines
    generation.py  continuation, streaming          embedding.py   sentence/token vectors
    blanks.py      text with blanks, infill results sampling.py    greedy / top-p, seeded
    runner.py      model + lock + adapter switch + forward of rows + KV cache factory
    multi_lora.py  every use of peft internals, behind a version check
    batching.py    lanes: several decoding jobs in one batch     masks.py  every mask rule

Training: views.py (batches) -> objectives.py (losses, pooling) -> train.py (the trainer CLI).
"""
