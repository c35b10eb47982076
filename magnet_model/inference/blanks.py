"""Text with blanks: split at the markers, spans put back, and the infill result types.

The text side both infill paths (MAGNET's and the prompted baselines') share."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EmptyInputError, InputError, NoBlankError, TooManyBlanksError

DEFAULT_MARKER = "[blank]"
# Why a span ended, and how to say it to a person.
END_REASONS = {
    "end": "stopped by itself",
    "joined": "stopped where it ran into the text after the blank",
    "best": "ended where it and the text after the blank read best",
    "max": "cut at the length limit",
    "fixed": "fixed length",
}


@dataclass
class FilledSpan:
    text: str
    token_ids: list[int]
    start: int  # character offsets of the span in InfillResult.filled
    end: int
    end_reason: str  # one of END_REASONS
    written: int | None = None  # tokens the system wrote for it, before any were trimmed
    # the tokens it wrote (prompted: its reply before the answer was read out of it; None:
    # token_ids are what the model wrote), and whether the length limit cut them (a prompted
    # reply cut there can still read as 'joined', when the answer was found before the cut)
    written_ids: list[int] | None = None
    capped: bool = False
    # prompted: the tokens the copy guard refused while it was written (textrules.CopyGuard:
    # each would have begun the last word of a run copied from the prompt)
    copy_blocks: int = 0
    # MAGNET: per decoding step, (log-probability of the token picked, of <span_end> there);
    # the steps past a trimmed end stay (infill.InfillJob.trace)
    trace: list[tuple[float, float]] | None = None

    @property
    def stopped(self) -> bool:
        """The model ended the span itself (<span_end>), not a rule of the decoder."""
        return self.end_reason == "end"

    @property
    def fits(self) -> bool:
        """The span ended inside the blank: by itself, where it ran into the right context, or
        where the stop rule cut it (stops.py)."""
        return self.end_reason in ("end", "joined", "best")


@dataclass
class InfillResult:
    text: str  # the input, with its blank markers
    filled: str
    spans: list[FilledSpan]
    system: str  # "magnet", "zero-shot", "five-shot"
    adapter: str
    context_tokens: int
    seconds: float  # whole call
    encode_seconds: float  # context (or prompt) encoding
    decode_seconds: float  # span decoding
    seed: int | None = None

    @property
    def generated_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.spans)

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def highlighted(self) -> list[tuple[str, str | None]]:
        """(piece, label) pairs for gr.HighlightedText: spans labelled 'blank 1', 'blank 2'..."""
        out, at = [], 0
        for k, s in enumerate(self.spans, start=1):
            if s.start > at:
                out.append((self.filled[at : s.start], None))
            out.append((self.filled[s.start : s.end], f"blank {k}"))
            at = s.end
        if at < len(self.filled):
            out.append((self.filled[at:], None))
        return out


def split_blanks(text: str, marker: str = DEFAULT_MARKER, max_blanks: int = 8) -> list[str]:
    """text -> the n + 1 pieces around its n blanks, with typed errors for bad input."""
    if not text or not text.strip():
        raise EmptyInputError("The text is empty; type a text with at least one blank.")
    if not marker:
        raise InputError("The blank marker must not be empty.")
    pieces = text.split(marker)
    n = len(pieces) - 1
    if n == 0:
        raise NoBlankError(f"The text has no blank; put {marker} where words are missing.")
    if n > max_blanks:
        raise TooManyBlanksError(
            f"The text has {n} blanks; at most {max_blanks} are filled at once."
        )
    if not "".join(pieces).strip():
        raise EmptyInputError("The text has only blanks; give some context around them.")
    return pieces


def per_blank(value, n: int, what: str) -> list:
    if value is None or isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise InputError(f"{what} has {len(value)} entries for {n} blanks; give one per blank.")
    return value


def assemble(pieces: list[str], gaps: list[str], spans: list[str]) -> tuple[str, list[tuple]]:
    """Pieces with the span texts in the blanks -> (filled text, (start, end) per span).

    The whitespace typed before a blank is kept only if the span does not bring its own;
    offsets leave out a span's surrounding whitespace so highlighting covers the words.
    """
    out: list[str] = []
    length = 0
    offsets = []
    for i, piece in enumerate(pieces):
        out.append(piece)
        length += len(piece)
        if i == len(spans):
            break
        span = spans[i]
        lead = span[: len(span) - len(span.lstrip())] or gaps[i]
        core = span.strip()
        tail = span[len(span.rstrip()) :] if core else ""
        start = length + len(lead)
        offsets.append((start, start + len(core)))
        piece_text = lead + core + tail
        out.append(piece_text)
        length += len(piece_text)
    return "".join(out), offsets


def strip_gaps(pieces: list[str]) -> tuple[list[str], list[str]]:
    """The pieces without the spaces typed right before each blank, and those spaces (the
    model sees no trailing space; the filled text keeps the user's spacing)."""
    stripped = [p.rstrip(" \t") for p in pieces[:-1]] + [pieces[-1]]
    gaps = [p[len(q) :] for p, q in zip(pieces[:-1], stripped, strict=False)]
    return stripped, gaps
