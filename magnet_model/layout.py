"""How a text with removed spans is laid out for the hybrid (MAGNET) mask.

This is the contract between training (MSG view) and inference (infill): both build the
sequence here, so the model sees at inference exactly the layout it was trained on.

For context pieces c0, c1, ..., cn around n blanks and spans s1..sn:

    [bos] c0 <blank> c1 <blank> ... cn | <span_start> s1 | <span_start> s2 | ...
    '---------- context: segment 0 ---'  '- segment 1 -'   '- segment 2 -'

- Context tokens (segment 0) attend bidirectionally to each other, never to span tokens.
- Span k (segment k) attends to all context and causally to its own earlier tokens.
- Positions: context tokens are numbered 0..L-1 as usual; span k's <span_start> takes the
  position p of its <blank> and its j-th token p + j. So each span sits where it belongs,
  right after its left context, as in ordinary left-to-right text.
- Targets (MSG): the output at <span_start> predicts s_k[0], at s_k[j] predicts s_k[j+1], and
  at the last span token predicts <span_end>: the model learns when a span ends, so a blank
  of unknown length is filled with a span that stops by itself.
- If the whole text is one span (no context but the blank) MSG is plain next-token LM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tokens import TokenRoles

IGNORE = -100


@dataclass
class HybridSequence:
    input_ids: list[int]
    segments: list[int]  # 0 = context, k = span k (1-based)
    position_ids: list[int]
    labels: list[int]  # MSG targets, IGNORE elsewhere
    blank_positions: list[int] = field(default_factory=list)  # index of each <blank>
    context_length: int = 0


def build_hybrid(
    pieces: list[list[int]],
    spans: list[list[int]],
    roles: TokenRoles,
    bos: int | None = None,
    with_end: bool = True,
) -> HybridSequence:
    """Lay out context pieces (n + 1 of them) around n blanks, then the n spans.

    spans may be empty lists (inference: the context plus each span's <span_start>).
    with_end=True adds the <span_end> target after each span's last token (training).
    """
    if len(pieces) != len(spans) + 1:
        raise ValueError("need exactly one more context piece than spans")
    ids: list[int] = [] if bos is None else [bos]
    blank_positions: list[int] = []
    for i, piece in enumerate(pieces):
        ids.extend(piece)
        if i < len(spans):
            blank_positions.append(len(ids))
            ids.append(roles.blank)
    n_ctx = len(ids)
    segments = [0] * n_ctx
    positions = list(range(n_ctx))
    labels = [IGNORE] * n_ctx
    for k, (span, p) in enumerate(zip(spans, blank_positions, strict=True), start=1):
        ids.append(roles.span_start)
        ids.extend(span)
        segments.extend([k] * (len(span) + 1))
        positions.extend(p + j for j in range(len(span) + 1))
        targets = list(span) + ([roles.span_end] if with_end else [IGNORE])
        labels.extend(targets)
    return HybridSequence(ids, segments, positions, labels, blank_positions, n_ctx)
