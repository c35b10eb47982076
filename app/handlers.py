"""What the buttons call: MagnetApp, the handlers of every page put together.

Each area has its own module, all building on one state (services.Services: the engine, the
annotation store, the search encoders, the limits):

- demo.py: the Infill (and blind vote), Continue and Search tabs;
- admin/: the Admin tab, one file per concern (login, create, output checks, invites,
  status, results, exports);
- rater.py: the rater's page (/rate, laid out in rater_page.py);
- model_calls.py: each comparison's model work as one GPU call, which demo and admin use.

MagnetApp(engine, store, settings, ...) is what the page modules wire into the layout and what the
tests call, so tests call what Gradio calls. A handler with several outputs returns a named
result (outputs.py), which Gradio gets as its tuple of values through outputs.gradio_fn.
"""

from __future__ import annotations

from .admin import AdminHandlers
from .demo import DemoHandlers
from .rater import RaterHandlers


class MagnetApp(DemoHandlers, AdminHandlers, RaterHandlers):
    """The services of one process (the fields of services.Services) with the handlers of
    the demo tabs, the Admin tab and the rater's page."""
