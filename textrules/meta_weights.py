"""Written by `python bench/fit_meta_rule.py` (do not edit): the logistic weights
of textrules/meta.py's features, fitted on every row of
tests/data/labelled_outputs.jsonl, and the threshold (bench/results/meta_rule.json).
"""

BIAS = -4.3459
THRESHOLD = 0.79
WEIGHTS: dict[str, float] = {
    "task_nouns": 4.3006,
    "words": 1.8689,
    "task_verbs": 3.1068,
    "ask_nouns": 2.6094,
    "quoted_with": 0.6444,
    "quotes_passage": 0.3395,
    "quote_share": 1.495,
    "unpaired_quotes": 0.1196,
    "label_start": 1.8891,
    "ends_colon": 2.152,
    "markdown": 0.4786,
    "negation_start": 1.0298,
    "imperative_start": 0.9168,
    "this_start": 1.3588,
}
