"""The Admin tab's handlers, one file per concern, put together as AdminHandlers:

- base.py: what every view stands on (the login check, the study list, a study's model call);
- login.py: the password, the login route and its cookie, the panel;
- create.py: a new study (preset, planner, the outputs generated in the background);
- output_checks.py: the outputs' check, making flagged outputs again, dropping their items;
- invites.py: invite links, a new link for one rater, revoking one;
- status.py: a study's status, and the demo paused beside it (or kept on);
- results.py: progress, and the results as a table, JSON and a plot;
- exports.py: ratings, the HTML report and a backup, each behind a single-use link;
- page.py: the tab's layout and wiring.

Every handler but the login and the planner needs the admin's login first (base._admin);
files leave the server only through a single-use download link (security.PrivateDownloads).
"""

from __future__ import annotations

from .create import CreateViews
from .exports import ExportViews
from .invites import NOT_CONFIRMED, InviteViews
from .login import LoginResult, LoginViews
from .output_checks import OutputCheckViews
from .results import ResultViews
from .status import STATUS_CHOICES, StatusViews

__all__ = ["NOT_CONFIRMED", "STATUS_CHOICES", "AdminHandlers", "LoginResult"]


class AdminHandlers(
    LoginViews,
    CreateViews,
    OutputCheckViews,
    InviteViews,
    StatusViews,
    ResultViews,
    ExportViews,
):
    """What the Admin tab calls: every admin view, on the services of one process."""
