"""Written by `python bench/fit_meta_rule.py` (do not edit): the logistic weights
of textrules/meta.py's features, fitted on every row of
tests/data/labelled_outputs.jsonl, and the threshold (bench/results/meta_rule.json).
"""

BIAS = -4.3732
THRESHOLD = 0.81
WEIGHTS: dict[str, float] = {
    "task_nouns": 4.4228,
    "words": 2.4784,
    "task_verbs": 3.0426,
    "ask_nouns": 2.7163,
    "quoted_with": 0.6387,
    "quotes_passage": 0.3299,
    "quote_share": 1.6513,
    "unpaired_quotes": 0.2049,
    "label_start": 1.3597,
    "ends_colon": 2.2406,
    "markdown": 0.5641,
    "negation_start": 0.9875,
    "imperative_start": 0.7566,
    "this_start": 1.398,
}
