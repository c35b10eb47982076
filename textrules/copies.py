"""What a copy of the passage is: a fill that repeats the text around its blank instead of
filling it: a run of COPY_WORDS words of the passage in the fill, counted in words.words.
A shorter fill is never a copy, even when the passage holds it whole: a name or phrase the
passage uses elsewhere is often the right fill of a word or phrase blank (measured on the
hand-labelled outputs of tests/data/labelled_outputs.md, a rule that also flagged fills of
3-5 words found whole in the passage added no copy a reader saw, and 10 a reader did not).

annotation_db flags such fills among a study's outputs ("copy"); the rule lives here, below both
libraries, so that magnet_model reads the same rule when it needs one.
"""

from __future__ import annotations

from .words import ngrams, words

COPY_WORDS = 6  # a run of this many words of the passage, copied into a fill
MARKER = "[blank]"  # the app's blank; removed from the passage before the copy check


def is_copy(fill: str, context: str, run_words: int = COPY_WORDS) -> bool:
    """A run of run_words words of the context in the fill. MARKER in the context is no word
    of it."""
    if run_words < 1:
        return False
    fw, cw = words(fill), words(context.replace(MARKER, " "))
    return bool(ngrams(fw, run_words) & ngrams(cw, run_words))


class CopyGuard:
    """The copy rule at decode time: built from the texts a reply must not copy (the passage,
    an example, the instruction), it says whether a reply so far ends in a run of run_words
    words of one of them, its last word counted while it is still being written ("on the
    ma" continues "on the mat"), so the decoder can refuse the token that would begin the
    copy's last word instead of cutting the copy afterwards. Runs never span two sources."""

    def __init__(self, sources: list[str] | tuple[str, ...], run_words: int = COPY_WORDS):
        self.run_words = run_words
        # the first run_words - 1 words of each run -> the words that end it
        self.next_words: dict[tuple[str, ...], set[str]] = {}
        for source in sources:
            w = words(source.replace(MARKER, " "))
            for i in range(len(w) - run_words + 1):
                head = tuple(w[i : i + run_words - 1])
                self.next_words.setdefault(head, set()).add(w[i + run_words - 1])

    def copies(self, reply: str) -> bool:
        """Whether the reply ends in a run of run_words words of a source; when it ends inside
        a word, that word may still grow into the run's last word."""
        if self.run_words < 1 or not self.next_words:
            return False
        w = words(reply)
        if len(w) < self.run_words:
            return False
        head, last = tuple(w[-self.run_words : -1]), w[-1]
        ends = self.next_words.get(head)
        if not ends:
            return False
        inside = bool(reply) and (reply[-1].isalnum() or reply[-1] in "'’´ʼ`")
        return last in ends if not inside else any(e.startswith(last) for e in ends)
