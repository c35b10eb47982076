"""Sentence splitters on the held-out texts: which one errs least (magnet_model/units.py).

    python bench/bench_splitters.py [--show 30]

Needs the splitters: `pip install pysbd sentencex syntok` (sentencex is a runtime
dependency; the other two are only compared here). Runs those installed on the held-out
Wikipedia paragraphs and the Lee news corpus and counts, per splitter:
- suspect splits: a boundary after an abbreviation or initial ("U.S.", "Dr.", "J.") or before a
  lower-case word or a digit (a sentence rarely starts so);
- splits after ; : or , (a clause, not a sentence);
- suspect misses: a ". " + capitalised word inside one sentence where the word before is no
  abbreviation or initial, and how many of them lie inside a quotation;
and prints the places where the splitters disagree, to be judged by eye. Writes
bench/results/splitters.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ABBREV = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "sgt", "capt", "rev",
    "no", "vol", "fig", "e.g", "i.e", "etc", "vs", "c", "ca", "u.s", "u.k", "inc", "ltd", "co",
    "corp", "mt", "ft", "jan", "feb", "aug", "sept", "oct", "nov", "dec", "approx", "al",
}  # fmt: skip


def splitters() -> dict:
    out = {}
    try:
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False)
        out["pysbd"] = seg.segment
    except ImportError:
        pass
    try:
        from sentencex import segment

        out["sentencex"] = lambda t: list(segment("en", t))
    except ImportError:
        pass
    try:
        import syntok.segmenter as sy

        def syn(t):
            return [
                "".join(tok.spacing + tok.value for tok in s).strip()
                for para in sy.analyze(t)
                for s in para
            ]

        out["syntok"] = syn
    except ImportError:
        pass
    return out


def boundaries(text: str, sentences: list[str]) -> set[int]:
    """Character offsets where a sentence ends (the last sentence's end excluded)."""
    out, at = set(), 0
    for s in sentences:
        s = s.strip()
        if not s:
            continue
        i = text.find(s, at)
        if i < 0:
            i = text.find(s[:20], at)
            if i < 0:
                continue
            s = s[: len(s)]
        at = i + len(s)
        out.add(at)
    out.discard(len(text.rstrip()))
    return out


def _word_before(text: str, i: int) -> str:
    m = re.search(r"(\S+)$", text[:i])
    return (m.group(1) if m else "").rstrip(".").lower()


def suspect_split(text: str, b: int) -> bool:
    before = _word_before(text, b)
    after = text[b:].lstrip()[:1]
    initial = len(before) == 1 and before.isalpha()
    return before in ABBREV or initial or (after.islower() or after.isdigit())


def candidate_ends(text: str) -> set[int]:
    """'. ' + capital where the word before is no abbreviation or initial: a sentence end."""
    out = set()
    for m in re.finditer(r"[.!?][\"”’)]*(?=\s+[A-Z\"“])", text):
        b = m.end()
        before = _word_before(text, m.start() + 1)
        if before not in ABBREV and not (len(before) == 1 and before.isalpha()):
            out.add(b)
    return out


def _inside_quote(text: str, i: int) -> bool:
    head = text[:i]
    return head.count('"') % 2 == 1 or head.count("“") > head.count("”")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--show", type=int, default=30, help="disagreements to print")
    p.add_argument("--out", default="bench/results/splitters.json")
    args = p.parse_args(argv)
    from magnet_model.data import lee_background_docs, wikipedia_paragraphs

    texts = wikipedia_paragraphs("heldout") + lee_background_docs()
    fns = splitters()
    result = {"texts": len(texts), "chars": sum(map(len, texts)), "splitters": {}}
    cuts = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        cuts[name] = [boundaries(t, fn(t)) for t in texts]
        secs = time.perf_counter() - t0
        pairs = list(zip(texts, cuts[name], strict=True))
        bad_split = sum(suspect_split(t, b) for t, bs in pairs for b in bs)
        missed = sum(len(candidate_ends(t) - bs) for t, bs in pairs)
        n = sum(map(len, cuts[name]))
        clause = sum(t[:b].rstrip()[-1:] in ";:," for t, bs in pairs for b in bs)
        in_quote = sum(_inside_quote(t, c) for t, bs in pairs for c in candidate_ends(t) - bs)
        result["splitters"][name] = {
            "boundaries": n,
            "suspect_splits": bad_split,
            "splits_after_clause_punctuation": clause,
            "suspect_misses": missed,
            "misses_inside_quotes": in_quote,
            "seconds": round(secs, 2),
        }
    names = list(cuts)
    disagreements = []
    for ti in range(len(texts)):
        allb = set().union(*(cuts[n][ti] for n in names))
        for b in sorted(allb):
            who = [n for n in names if b in cuts[n][ti]]
            if len(who) < len(names):
                disagreements.append((ti, b, who))
    result["disagreements"] = len(disagreements)
    for ti, b, who in disagreements[: args.show]:
        t = texts[ti]
        print(f"[{'+'.join(who)} split] ...{t[max(0, b - 60) : b]} || {t[b : b + 40]}...")
    print(json.dumps(result["splitters"], indent=1))
    print(f"{result['texts']} texts, {result['disagreements']} disagreements")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
