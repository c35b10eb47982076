"""A stand-in for Hugging Face's `spaces` package on ZeroGPU hardware, for tests: what the real
`spaces.GPU` does to a call, without the GPU scheduler.

As on ZeroGPU, a decorated call asks for `duration` (seconds, or a function of the call's
arguments), and its arguments and result (each item, for a generator) go through pickle, as
they do between the server and the forked GPU worker; a gr.Error raised inside comes out as it
is, any other exception as a bare "ZeroGPU worker error" (what a visitor would see). Each call
is recorded in calls with its duration, and appended as a JSON line to $SPACES_STANDIN_LOG
where that is set (for an app in a subprocess). inside is true while a decorated call runs.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import pickle

calls: list[dict] = []
inside = False


def _record(name: str, seconds) -> None:
    entry = {"function": name, "duration": seconds}
    calls.append(entry)
    if os.environ.get("SPACES_STANDIN_LOG"):
        with open(os.environ["SPACES_STANDIN_LOG"], "a") as f:
            f.write(json.dumps(entry) + "\n")


def _crossed(value):
    return pickle.loads(pickle.dumps(value))


def _worker_error(e: Exception) -> Exception:
    import gradio as gr

    if isinstance(e, gr.Error):
        return _crossed(e)
    return gr.Error(f"ZeroGPU worker error: {type(e).__name__}")


def GPU(task=None, *, duration=None, size=None):  # noqa: N802 - the real package's name
    if task is None:
        return lambda fn: GPU(fn, duration=duration, size=size)

    def start(args, kwargs):
        global inside
        seconds = duration(*args, **kwargs) if callable(duration) else duration
        _record(task.__name__, seconds)
        args, kwargs = _crossed((args, kwargs))
        inside = True
        return args, kwargs

    if inspect.isgeneratorfunction(task):

        @functools.wraps(task)
        def generator(*args, **kwargs):
            global inside
            args, kwargs = start(args, kwargs)
            try:
                for item in task(*args, **kwargs):
                    yield _crossed(item)
            except Exception as e:
                raise _worker_error(e) from None
            finally:
                inside = False

        return generator

    @functools.wraps(task)
    def call(*args, **kwargs):
        global inside
        args, kwargs = start(args, kwargs)
        try:
            return _crossed(task(*args, **kwargs))
        except Exception as e:
            raise _worker_error(e) from None
        finally:
            inside = False

    return call
