"""`python -m app`: load the model once, open the annotation store, serve the Gradio UI.

Tabs: Infill, Continue, Search, Admin (only when MAGNET_ADMIN_PASSWORD is set); raters get a
page of their own at /rate (rater_page.py), which invite links open. The handlers live in
demo.py, admin/ and rater.py, put together as handlers.MagnetApp; each page's layout and
wiring beside them (demo_page.py, admin/page.py, rater_page.py). This file puts the page
together (theme, CSS, queue), wires the server (request guard, routes) and starts it.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path

import gradio as gr
from gradio.utils import get_upload_folder
from starlette.middleware import Middleware
from starlette.routing import Route

from annotation_db import AnnotationError, AnnotationStore
from annotation_db.settings import load_store_settings
from magnet_model import systems
from magnet_model.errors import MagnetError, ModelLoadError
from magnet_model.inference.engine import Engine
from magnet_model.loading import load_model
from magnet_model.settings import ModelSpec, add_model_args
from magnet_model.systems import TITLES

from .admin.page import admin_tab
from .blinding import POLICY_FILE, DemoPolicy
from .demo_page import continue_tab, infill_tab, search_tab
from .gpu import has_spaces, server_spec, zero_gpu
from .handlers import MagnetApp
from .model_calls import default_corpus
from .rater_page import REDIRECT_JS, add_rater_page
from .render import model_description
from .security import (
    ADMIN_SESSION_ROUTE,
    DOWNLOAD_ROUTE,
    MAX_REQUEST_BYTES,
    UPLOAD_OVERHEAD_BYTES,
    PrivateDownloads,
    RequestGuard,
    UploadQuota,
    parse_networks,
)
from .settings import AppSettings, proxy_env

log = logging.getLogger("app")

# A system font stack: the default theme's web font cannot load offline, and its fallback drew
# the title as "MᴀGNET".
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]
THEME = gr.themes.Default(font=SYSTEM_FONTS + ["sans-serif"], font_mono=MONO_FONTS)
CSS = """
.filled { white-space: pre-wrap; overflow-wrap: break-word; word-break: normal;
          line-height: 1.7; margin: 0.25em 0; font-size: 1.05em; }
.filled mark.fill { background: #fde68a; color: inherit; padding: 0.05em 0.2em;
                    border-radius: 0.25em; }
.filled sup.fill-n { font-size: 0.7em; color: #92400e; margin-left: 0.1em; }
.filled-box { padding: 0.5em 0.75em; }
/* the Infill columns: the text flush with its title, not ~33 px in (three paddings; tour p6) */
.infill-col .filled-box, .infill-col .html-container { padding-left: 0; padding-right: 0; }
.rate-msg { color: #b91c1c; font-weight: 600; padding: 0.5em 0; }
.rate-out-title { padding: 0.4em 0.75em; font-weight: 600; }
/* the rater page: an output's text flush with its title "Output A" (tour q4) */
.filled-box.html-container, .filled-box .html-container { padding-left: 0; padding-right: 0; }
.search-table table th, .results-table th, .results-table th * { white-space: nowrap !important; }
/* passages read as prose, not code; the table grows with its rows instead of scrolling */
.search-table table td { font-family: var(--font); }
/* a small table of numbers takes the width its cells need, never more than its column */
.small-table { border-collapse: collapse; margin: 0.5em 0; width: auto !important;
               max-width: 100%; font-size: 0.85em; }
.small-table caption { text-align: left; font-weight: 600; padding-bottom: 0.4em; }
.small-table th, .small-table td { border: 1px solid var(--border-color-primary);
                                   padding: 0.25em 0.35em !important; text-align: right;
                                   min-width: 0 !important; }
/* the overlap matrix: the column's width, not three paddings less (it must fit a phone) */
.overlap-table.block, .overlap-table .html-container { padding-left: 0; padding-right: 0; }
.small-table th[scope="row"], .small-table thead th:first-child { text-align: left; }
.nav-holder { display: none !important; }  /* the pages are reached by link, not a menu */
/* the rater page: no "Use via API" or "Settings" footer (raters need neither) */
body:has(#rate-message) footer { display: none !important; }
/* a text typed right-to-left (Arabic, Hebrew) shows right-to-left, line by line (tour n5) */
textarea { unicode-bidi: plaintext; }
"""


UPLOAD_CACHE = (600, 3600)  # (every, older than) seconds: Gradio's delete_cache


def build_demo(app: MagnetApp) -> gr.Blocks:
    """The demo's tabs, and the raters' own page at /rate; queue: one model call at a time
    (setting), bounded waiting line."""
    adapters = ", ".join(app.engine.runner.adapter_names) or "none"
    wanted = {s.adapter for s in systems.SYSTEMS if s.adapter}  # the table's adapters
    missing = sorted(wanted - set(app.engine.runner.adapter_names), key=list(systems.BY_NAME).index)
    loaded = app.engine.loaded
    model = model_description(loaded.spec.base, loaded.source, str(app.engine.runner.device))
    # Gradio's own temporary files (uploaded corpora and item files, which hold the hidden
    # original spans) are deleted an hour after they were made, checked every 10 minutes.
    # A study deployment (MAGNET_DEMO=false) serves no demo: nothing where a rater could rerun
    # an item, and no model name in the page's title.
    with gr.Blocks(
        title="MAGNET" if app.settings.demo else "Rating", delete_cache=UPLOAD_CACHE
    ) as demo:
        if app.settings.demo:
            gr.Markdown(
                "# MAGNET\nOne decoder LLM that infills (left and right context), continues "
                f"text and embeds sentences. Base model: {model}; adapters: {adapters}."
                + (f" Not loaded: {', '.join(missing)} (shown as unavailable)." if missing else "")
                + " The models read and write English only. Raters: open the invite link you "
                "were sent."
            )
        else:
            gr.Markdown("# Rating studies\nRaters: open the invite link you were sent.")
        demo.load(None, js=REDIRECT_JS)  # an old invite link (/?token=...) opens /rate
        if app.settings.demo:
            # said when the page opens, not after a visitor typed and clicked
            paused = gr.Markdown("", elem_id="demo-paused")
            demo.load(app.demo_notice, outputs=paused, queue=False, show_progress="hidden")
            with gr.Tab("Infill", id="infill"):
                infill_tab(app)
            with gr.Tab("Continue", id="continue"):
                continue_tab(app)
            with gr.Tab("Search", id="search"):
                search_tab(app)
        if app.settings.admin_password:
            with gr.Tab("Admin", id="admin"):
                admin_tab(app)
    add_rater_page(app, demo)
    # api_open=False: a queued event (every model call) is reachable only through the queue,
    # where its validator counts it; POST /gradio_api/run/infill skipped both (review 4, N13)
    demo.queue(
        default_concurrency_limit=app.settings.concurrency,
        max_size=app.settings.queue_size,
        api_open=False,
    )
    return demo


def server_app_kwargs(app: MagnetApp, upload_folder: Path | None = None) -> dict:
    """What the FastAPI app under Gradio gets: the request guard (body cap, upload quota,
    trusted proxies, security headers, closed Gradio routes), the admin's login route and the
    route of the admin's single-use downloads."""
    st = app.settings
    upload_cap = st.max_upload_mb * 2**20 + UPLOAD_OVERHEAD_BYTES
    uploads = UploadQuota(
        per_client_bytes=st.upload_mb_per_hour * 2**20,
        total_bytes=st.upload_mb_per_hour_total * 2**20,
        folder=Path(upload_folder or get_upload_folder()),
        min_free_bytes=st.upload_min_free_mb * 2**20,
    )
    guard = Middleware(
        RequestGuard,
        max_body_bytes=MAX_REQUEST_BYTES,
        max_upload_bytes=upload_cap,
        trusted_proxies=parse_networks(st.trusted_proxies or ""),
        frame_ancestors=st.frame_ancestors,
        uploads=uploads,
        public_url=st.public_url,
    )
    return {
        "middleware": [guard],
        "routes": [
            Route(f"/{DOWNLOAD_ROUTE}/{{ticket}}", app.downloads.endpoint),
            Route(f"/{ADMIN_SESSION_ROUTE}", app.session_endpoint, methods=["POST", "DELETE"]),
        ],
    }


def check_upload_disk(upload_folder: Path, store: AnnotationStore) -> None:
    """Say at start-up when uploads land on the rating database's disk (the upload quota and
    free-space floor still hold; a separate volume for GRADIO_TEMP_DIR is better)."""
    database = store.sqlite_file
    if database is None:
        return
    try:
        up = upload_folder if upload_folder.exists() else upload_folder.parent
        same = os.stat(up).st_dev == os.stat(database.parent).st_dev
    except OSError:
        return
    if same:
        log.warning(
            "Uploads (%s) are on the rating database's disk; uploads stop while less than "
            "MAGNET_UPLOAD_MIN_FREE_MB is free there. Set GRADIO_TEMP_DIR to another volume "
            "to keep them apart.",
            upload_folder,
        )


def load_engine(spec: ModelSpec) -> tuple[Engine, dict[str, ModelLoadError]]:
    """The engine with every adapter that loads, the base model loaded once; an adapter that
    does not load is reported (adapter -> the error saying why), not fatal. A base model that
    does not load raises its ModelLoadError."""
    engine = Engine(load_model(spec, skip_failed_adapters=True))
    return engine, dict(engine.loaded.failed)


def _read_default_corpus() -> None:
    try:
        default_corpus()
    except Exception as e:  # the warm-up, or the first search, says it again
        log.warning("The default search corpus could not be read ahead: %s", e)


def start_search_warmup(app: MagnetApp) -> threading.Thread:
    """Embed the default search corpus in the background while the page is served, unless
    `make prepare` cached it already: the first search then only embeds its query."""

    def warm() -> None:
        t0 = time.perf_counter()
        try:
            done = app.warm_search()
        except Exception as e:  # a full disk, say: the first search computes them then
            log.warning("The default search corpus was not embedded ahead: %s", e)
            return
        log.info(
            "Default search corpus after %.1f s: %s",
            time.perf_counter() - t0,
            "; ".join(f"{TITLES[s]} {what}" for s, what in done.items()),
        )

    thread = threading.Thread(target=warm, name="search-warmup", daemon=True)
    thread.start()
    return thread


def port_taken(host: str, port: int) -> str | None:
    """The one sentence to print when `host:port` cannot be listened on, else None. Checked
    before the model loads (a taken port should not cost the wait), and said again if
    Gradio's own bind fails later: Gradio would end in a traceback."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        # create_server sets SO_REUSEADDR as uvicorn does: a port only in TIME_WAIT is free
        with socket.create_server((host.strip("[]"), port), family=family):
            return None
    except OSError as e:
        why = (
            "is already in use" if e.errno == errno.EADDRINUSE else f"cannot be used ({e.strerror})"
        )
        return (
            f"Port {port} on {host} {why}; choose another with --port N or the variable "
            "GRADIO_SERVER_PORT (for example `GRADIO_SERVER_PORT=7861 make run`)."
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Serve the MAGNET demo.")
    add_model_args(parser)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
    )
    parser.add_argument("--db-path", help="SQLite file of the rating studies (MAGNET_DB_PATH)")
    parser.add_argument("--db-url", help="SQLAlchemy URL of the rating studies (MAGNET_DB_URL)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    if taken := port_taken(args.host, args.port):
        print(f"error: {taken}", file=sys.stderr)
        return 2
    try:
        settings = AppSettings.from_env()
        if settings.demo and settings.search_warmup:
            # the default search corpus is read (seconds of parsing) while the model loads
            reader = threading.Thread(target=_read_default_corpus, name="corpus", daemon=True)
            reader.start()
        spec = server_spec(ModelSpec.from_args(args))
        store = AnnotationStore(url=args.db_url, path=args.db_path)  # fails fast if read-only
        engine, unavailable = load_engine(spec)
    except (MagnetError, AnnotationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    log.info(
        "Model %s on %s (%s); adapters: %s",
        engine.loaded.source,
        engine.runner.device,
        engine.runner.dtype,
        engine.loaded.adapters or "none",
    )
    log.info("Rating studies in %s", store.location)
    on_zero_gpu = zero_gpu()
    log.info(
        "Cache in %s; ZeroGPU: %s",
        spec.cache_dir,
        "on (the model moves to the GPU inside each call)"
        if on_zero_gpu
        else f"off (spaces {'installed' if has_spaces() else 'not installed'})",
    )
    log.info("Admin tab: %s", "on" if settings.admin_password else "off (MAGNET_ADMIN_PASSWORD)")
    log.info("Demo tabs: %s", "on" if settings.demo else "off (MAGNET_DEMO=false: a study runs)")
    # one fixed private folder, emptied now: a killed process's exports do not outlive it
    downloads = PrivateDownloads(root=load_store_settings().data_dir / "admin-files")
    atexit.register(downloads.close)
    app = MagnetApp(
        engine,
        store,
        settings,
        spec.cache_dir,
        unavailable,
        cuda_inside_calls=on_zero_gpu,
        downloads=downloads,
        demo_policy=DemoPolicy(load_store_settings().data_dir / POLICY_FILE),
    )
    if settings.demo and settings.search_warmup:
        start_search_warmup(app)  # beside building the page and launching it
    demo = build_demo(app)
    upload_folder = Path(get_upload_folder())
    check_upload_disk(upload_folder, store)
    proxy_env()  # uvicorn trusts no forwarded header; RequestGuard applies MAGNET_TRUSTED_PROXIES
    log.info("Ready to launch after %.1f s", time.perf_counter() - t0)
    try:
        demo.launch(
            server_name=args.host,
            server_port=args.port,
            max_file_size=f"{settings.max_upload_mb}mb",
            app_kwargs=server_app_kwargs(app, upload_folder),
            enable_monitoring=False,
            theme=THEME,
            css=CSS,
        )
    except OSError:
        # taken while the model loaded (Gradio says "Cannot find empty port"), or not bindable
        if taken := port_taken(args.host, args.port):
            print(f"error: {taken}", file=sys.stderr)
            return 2
        raise
    return 0
