"""`python -m magnet_model.training.publish ADAPTER REPO_ID`: push a trained adapter to the Hugging
Face Hub.

The folder goes up as the trainer and `python -m magnet_model.training.card` left it (the PEFT
files, magnet_config.json, the card README.md with its loss curves, train_log.jsonl), without the
trainer's checkpoints, through huggingface_hub's `upload_folder`. Then a Space names it in
MAGNET_ADAPTERS (`magnet=REPO_ID`). An adapter without its card or magnet_config.json is
refused: the card tells a reader what it is, magnet_config.json tells the app how to run it.
`--dry-run` prints what would be uploaded and sends nothing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..adapter_meta import META_FILE
from ..errors import ConfigError, MagnetError

CARD = "README.md"
# what an adapter must have, and the command that writes it
REQUIRED = {
    "adapter_config.json": "python -m magnet_model.training.train",
    "adapter_model.safetensors": "python -m magnet_model.training.train",
    META_FILE: "python -m magnet_model.training.train",
    CARD: "python -m magnet_model.training.card ADAPTER",
}
IGNORE = ["checkpoints", "checkpoints/*", "**/checkpoints/**", "*.tmp", "**/__pycache__/**"]


@dataclass(frozen=True)
class Upload:
    folder: Path
    repo_id: str
    files: list[tuple[str, int]]  # (path in the repo, bytes)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)


def plan(adapter: str | Path, repo_id: str) -> Upload:
    """What `publish` would upload: the files upload_folder keeps with our ignore patterns
    (and its own), or a ConfigError saying what is missing and which command writes it."""
    from huggingface_hub.utils import (
        DEFAULT_IGNORE_PATTERNS,
        HFValidationError,
        filter_repo_objects,
        validate_repo_id,
    )

    folder = Path(adapter)
    if not folder.is_dir():
        raise ConfigError(f"The adapter folder '{folder}' does not exist.")
    try:
        validate_repo_id(repo_id)
        if "/" not in repo_id:
            raise HFValidationError("no owner")
    except HFValidationError:
        raise ConfigError(
            f"'{repo_id}' is not a Hub repository id; write it as owner/name (e.g. you/magnet)."
        ) from None
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        what = " and ".join(f"{name} (written by `{REQUIRED[name]}`)" for name in missing)
        raise ConfigError(f"The adapter '{folder}' lacks {what}; nothing was uploaded.")
    paths = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    kept = filter_repo_objects(paths, ignore_patterns=IGNORE + list(DEFAULT_IGNORE_PATTERNS))
    return Upload(folder, repo_id, [(p, (folder / p).stat().st_size) for p in kept])


def publish(
    adapter: str | Path,
    repo_id: str,
    private: bool = False,
    commit_message: str | None = None,
    token: str | None = None,
    api=None,
) -> str:
    """Create the model repository if needed and upload the adapter; returns the commit URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    up = plan(adapter, repo_id)
    api = api or HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id,
            repo_type="model",
            folder_path=str(up.folder),
            ignore_patterns=list(IGNORE),
            commit_message=commit_message or f"Upload MAGNET adapter {up.folder.name}",
        )
    except (HfHubHTTPError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(
            f"Could not upload to {repo_id} ({first}); check the network and that HF_TOKEN "
            "(or `hf auth login`) has write access."
        ) from None
    return str(getattr(info, "commit_url", info))


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m magnet_model.training.publish",
        description="Upload a trained adapter folder (with its card) to the Hugging Face Hub.",
    )
    parser.add_argument(
        "adapter", help="adapter folder written by magnet_model.training.train and .card"
    )
    parser.add_argument("repo_id", help="Hub model repository, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--message", help="commit message")
    parser.add_argument("--token", help="Hub token (default: HF_TOKEN or `hf auth login`)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be uploaded; upload nothing"
    )
    args = parser.parse_args(argv)
    try:
        up = plan(args.adapter, args.repo_id)
        if args.dry_run:
            print(f"Would upload {len(up.files)} files ({_size(up.total_bytes)}) to {up.repo_id}:")
            for path, size in up.files:
                print(f"  {path}  ({_size(size)})")
            return 0
        url = publish(args.adapter, args.repo_id, args.private, args.message, args.token)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Uploaded {len(up.files)} files to {args.repo_id}: {url}")
    print(f"Serve it with MAGNET_ADAPTERS={up.folder.name}={args.repo_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
