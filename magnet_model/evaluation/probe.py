"""Token-level linear probe on CoNLL-2003 (POS, chunking, NER), as in the paper's Table 1.

Frozen features, one vector per WORD: the engine's token vector (Engine.embed_tokens, which
applies each adapter's convention: bidirectional adapters use the output at i-1, MNTP-style;
causal ones the token's own output) of the word's FIRST sub-token. A sentence is fed as its
words joined by single spaces; words are aligned to sub-tokens through the tokenizer's
character offsets.

Classifier: standardised features, multinomial logistic regression (scikit-learn, L2, C=1,
at most 100 L-BFGS iterations),
one per task, trained on a seeded subset of CoNLL train sentences and scored on a seeded
subset of CoNLL test sentences (sizes are reported). Scores, all on words:
- accuracy for every task (the paper's tables read as accuracy);
- NER also as micro-F1 over words whose gold or predicted tag is not "O" (word-level, not
  entity-level: a cheap score that is not inflated by the many "O" words).
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..data import ConllSentence, load_conll2003
from ..inference.embedding import token_vector_index
from ..masks import additive, allowed_mask, position_ids_for

TASKS = ("pos", "chunk", "ner")
MAX_ITER = 100  # L-BFGS steps: a fixed budget (separable features would run on and on)


@dataclass
class ProbeScore:
    task: str
    accuracy: float
    f1: float | None  # NER only: micro-F1 over non-"O" words
    train_words: int
    test_words: int
    classes: int

    def to_dict(self) -> dict:
        return asdict(self)


def conll_subset(split: str, n: int, seed: int) -> list[ConllSentence]:
    """n sentences of a CoNLL split, a seeded sample kept in file order (all if n is larger)."""
    sentences = load_conll2003(split)
    if n >= len(sentences):
        return sentences
    keep = sorted(random.Random(f"{seed}-{split}").sample(range(len(sentences)), n))
    return [sentences[i] for i in keep]


def word_starts(words: Sequence[str]) -> tuple[str, list[int]]:
    """Words joined by spaces -> (text, character start of each word)."""
    starts, at = [], 0
    for w in words:
        starts.append(at)
        at += len(w) + 1
    return " ".join(words), starts


def first_subtokens(offsets: Sequence[tuple[int, int]], starts: Sequence[int]) -> list[int]:
    """Index of the first token ending after each word start (-1 if the text was truncated).

    Offsets of byte-level BPE tokens include the space before a word ("Ġword" covers it), so
    "ends after the word's first character" is the test that works for every tokenizer.
    """
    out, t = [], 0
    for c in starts:
        while t < len(offsets) and offsets[t][1] <= c:
            t += 1
        out.append(t if t < len(offsets) else -1)
    return out


def token_vectors(engine, texts: Sequence[str], adapter: str | None, batch_size: int = 16):
    """Engine.embed_tokens for many texts in padded batches -> [(offsets, vectors)] per text.

    Same layout as embed_tokens (Engine.token_layout: exactly what training used; tests check
    both agree), but one forward per batch: on a CPU a forward of one short sentence costs
    about as much as one of sixteen, because reading the weights dominates.
    """
    runner = engine.runner
    tok = engine.tokenizer
    name = runner.resolve_adapter(adapter)
    prefix, mode = engine.token_layout(name)
    enc = tok(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    cap = engine.max_input_tokens - len(prefix)
    rows = [prefix + ids[:cap] for ids in enc.input_ids]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = []
    for at in range(0, len(rows), batch_size):
        batch = rows[at : at + batch_size]
        width = max(len(r) for r in batch)
        ids = runner.tensor([r + [pad] * (width - len(r)) for r in batch])
        real = runner.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch])
        mask = additive(allowed_mask(mode, real), runner.dtype)
        with runner.using(name):
            h = runner.hidden_states(ids, mask, position_ids_for(real)).float().cpu().numpy()
        for i, r in enumerate(batch):
            n = len(r) - len(prefix)
            vecs = h[i, token_vector_index(len(prefix), n, mode)]
            offsets = [tuple(o) for o in enc.offset_mapping[at + i][:n]]
            out.append((offsets, vecs))
    return out


def word_features(
    engine, sentences: Sequence[ConllSentence], adapter: str | None, batch_size: int = 16
):
    """(features (n_words, hidden), {task: tags}) for all words the model saw."""
    feats, tags = [], {t: [] for t in TASKS}
    joined = [word_starts(s.words) for s in sentences]
    vectors = token_vectors(engine, [text for text, _ in joined], adapter, batch_size)
    for s, (_, starts), (offsets, vecs) in zip(sentences, joined, vectors, strict=True):
        for w, idx in enumerate(first_subtokens(offsets, starts)):
            if idx < 0:
                break
            feats.append(vecs[idx])
            for t in TASKS:
                tags[t].append(getattr(s, t)[w])
    hidden = engine.runner.hidden_size
    x = np.stack(feats) if feats else np.zeros((0, hidden), dtype=np.float32)
    return x, tags


def fit_and_score(
    task: str, x_train: np.ndarray, y_train: list[str], x_test: np.ndarray, y_test: list[str]
) -> ProbeScore:
    """One logistic-regression probe: fit on train words, score on test words."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = sorted(set(y_train))
    if len(classes) == 1:  # a tiny sample: the probe can only say the one tag it saw
        pred = np.array(classes * len(y_test))
    else:
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=MAX_ITER))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(x_train, y_train)
        pred = clf.predict(x_test)
    f1 = None
    if task == "ner":
        labels = sorted((set(y_test) | set(pred.tolist())) - {"O"})
        f1 = float(f1_score(y_test, pred, labels=labels, average="micro")) if labels else 0.0
    acc = float(accuracy_score(y_test, pred))
    return ProbeScore(task, acc, f1, len(y_train), len(y_test), len(classes))


def run_probe(
    engine,
    train: Sequence[ConllSentence],
    test: Sequence[ConllSentence],
    adapter: str | None,
    batch_size: int = 16,
) -> dict[str, ProbeScore]:
    """Features of one system, then one probe per task."""
    x_train, y_train = word_features(engine, train, adapter, batch_size)
    x_test, y_test = word_features(engine, test, adapter, batch_size)
    return {t: fit_and_score(t, x_train, y_train[t], x_test, y_test[t]) for t in TASKS}
