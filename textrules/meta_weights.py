"""Written by `python bench/fit_meta_rule.py` (do not edit): the logistic weights
of textrules/meta.py's features, fitted on every row of
tests/data/labelled_outputs.jsonl, and the threshold (bench/results/meta_rule.json).
"""

BIAS = -4.3665
THRESHOLD = 0.82
WEIGHTS: dict[str, float] = {
    "task_nouns": 4.4276,
    "words": 2.3554,
    "task_verbs": 2.9966,
    "ask_nouns": 2.7089,
    "quoted_with": 0.6642,
    "quotes_passage": 0.2807,
    "quote_share": 1.7082,
    "unpaired_quotes": 0.2127,
    "label_start": 1.3441,
    "ends_colon": 2.2293,
    "markdown": 0.5671,
    "negation_start": 1.0057,
    "imperative_start": 0.7143,
    "this_start": 1.3901,
}
