"""What people read: filled texts as flowing HTML (user text escaped), labels instead of raw
ids, counts in words, the model described in plain words.

Pure functions of strings and numbers; no Gradio, no model math.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

# The answer codes a rater or visitor picks, in words (the stored value stays the code).
CHOICE_LABELS = {"tie": "A tie", "all_bad": "All are bad"}
# Question specs of the Admin tab, in words.
QUESTION_LABELS = {
    "appropriate": "Appropriate? (yes/no per output)",
    "likert:fluency": "Fluency (1-5 per output)",
    "likert:coherence": "Fit with the text after the blank (1-5 per output)",
    "preference": "Which output is best",
    "comment": "Comment (optional)",
}


def choice_label(code: str) -> str:
    """'A' -> 'Output A', 'tie' -> 'A tie', 'all_bad' -> 'All are bad'."""
    return CHOICE_LABELS.get(code, f"Output {code}")


def choices(codes: Sequence[str]) -> list[tuple[str, str]]:
    """(label, value) pairs for a gr.Radio: people read labels, handlers get the codes."""
    return [(choice_label(c), c) for c in codes]


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 passage', '2 passages', '1 attention check'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def filled_html(pieces: Sequence[tuple[str, str | None]]) -> str:
    """(text, label) pieces as one flowing paragraph: labelled pieces (the fills) are marked
    inline and numbered when there are several; every piece is escaped, so markup a person
    typed shows as text."""
    n_fills = sum(1 for _, lab in pieces if lab)
    out, k = [], 0
    for text, label in pieces:
        if not label:
            out.append(html.escape(text))
            continue
        k += 1
        body = html.escape(text) if text.strip() else "&#8203;"  # an empty fill stays visible
        num = f'<sup class="fill-n">{k}</sup>' if n_fills > 1 else ""
        out.append(f'<mark class="fill" title="blank {k}">{body}{num}</mark>')
    return f'<p class="filled" dir="auto">{"".join(out)}</p>'


def table_html(caption: str, headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A small table of numbers as plain HTML, every cell escaped: it takes the width its
    cells need (a phone shows it whole, no sideways scroll) and the first column heads its rows.
    """
    head = "".join(f'<th scope="col">{html.escape(str(h))}</th>' for h in headers)
    body = ""
    for first, *rest in rows:
        cells = "".join(f"<td>{html.escape(str(c))}</td>" for c in rest)
        body += f'<tr><th scope="row">{html.escape(str(first))}</th>{cells}</tr>'
    return (
        f'<table class="small-table"><caption>{html.escape(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def fills_pieces(text: str, marker: str, filled: str, fills: Sequence[str] | None) -> list:
    """A blanked text with each marker replaced by its fill, the fills labelled; the whole
    filled text, unlabelled, when the fills do not match the blanks."""
    parts = text.split(marker)
    if not fills or len(parts) != len(fills) + 1:
        return [(filled, None)]
    out: list[tuple[str, str | None]] = []
    for k, fill in enumerate(fills):
        out += [(parts[k], None), (fill, f"blank {k + 1}")]
    out.append((parts[-1], None))
    return [(p, lab) for p, lab in out if p or lab]


# what would start Markdown (emphasis, code, links, tables, headings, maths) inside a line
_MD_SPECIAL = str.maketrans({c: f"&#{ord(c)};" for c in "\\`*_[]#|~$"})


def md_text(text: str) -> str:
    """A model's or a user's text as plain text inside Markdown: escaped, on one line."""
    return html.escape(" ".join(text.split()), quote=False).translate(_MD_SPECIAL)


def fill_check(
    study: str, counts: Sequence, titles: dict[str, str], problems: Sequence[tuple[str, str]]
) -> str:
    """The outputs' check before inviting, as Markdown: per system, how many outputs have each
    problem (annotation_db.fills: counts and problems, as (name, meaning)), then examples of
    each (item key and fill)."""
    head = f"**Outputs of {md_text(study)}, checked before inviting**"
    if not counts:
        return f"{head}: no system output to check."
    names = [p for p, _ in problems]
    rules = "; ".join(f"{p}: {why}" for p, why in problems)
    lines = [
        head,
        "",
        "| system | outputs | flagged | " + " | ".join(names) + " |",
        "|---|" + "---:|" * (2 + len(names)),
    ]
    for c in counts:
        cells = [str(c.counts.get(p, 0)) for p in names]
        unchecked = f" ({c.unchecked} unchecked)" if c.unchecked else ""
        title = md_text(titles.get(c.system, c.system))
        lines.append(f"| {title} | {c.n_outputs}{unchecked} | {c.flagged} | {' | '.join(cells)} |")
    examples = []
    for c in counts:
        for p in names:
            shown = c.examples.get(p) or []
            if shown:
                said = "; ".join(f"{md_text(f.item_key)}: “{md_text(f.fill)}”" for f in shown)
                title = md_text(titles.get(c.system, c.system))
                examples.append(f"- {title}, **{p}** ({c.counts[p]}): {said}")
    if examples:
        lines += ["", "Examples:", *examples]
    else:
        lines += ["", "No output has any of these problems."]
    return "\n".join([*lines, "", f"<small>{md_text(rules)}</small>"])


def model_name(base_model: str, source: str) -> str:
    """The base model's name: the built-in one's, a Hub id, or a local folder's or file's
    name (never the path on the server)."""
    if base_model == "embedded":
        return "SmolLM2-135M-Instruct"
    local = Path(base_model).expanduser()
    if local.exists() or base_model[:1] in "/.~" or base_model.count("/") != 1:
        return local.name or Path(source).name or "a local model"
    return base_model  # a Hub id such as meta-llama/Llama-2-7b-hf


def model_description(base_model: str, source: str, device: str) -> str:
    """The base model in plain words, for the page's header."""
    name = model_name(base_model, source)
    built_in = " (built in)" if base_model == "embedded" else ""
    where = "a GPU" if str(device).startswith("cuda") else "the CPU"
    return f"{name}{built_in}, on {where}"
