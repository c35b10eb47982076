"""The one table of systems (magnet_model/systems.py): what each task runs, in which order, and
how a name outside the table (an N-shot prompt, an extra adapter) reads."""

import pytest

from magnet_model import systems
from magnet_model.errors import InputError


def test_each_task_reads_its_systems_from_the_table():
    assert systems.for_task("infill") == ("magnet", "zero-shot", "five-shot")
    assert systems.for_task("continue") == ("magnet", "base", "llm2vec")
    assert systems.for_task("search") == ("magnet", "minilm", "base", "llm2vec")
    assert systems.for_task("evaluate") == ("magnet", "minilm", "base", "llm2vec")
    with pytest.raises(ValueError):
        systems.for_task("translate")


def test_kinds_say_how_a_system_runs():
    assert systems.get("magnet").adapter == "magnet"
    assert systems.get("base").adapter is None and systems.get("base").uses_llm
    assert systems.get("five-shot").kind == systems.PROMPTED and systems.get("five-shot").shots == 5
    assert systems.get("minilm").kind == systems.ENCODER and not systems.get("minilm").uses_llm
    assert systems.shots_name(0) == "zero-shot" and systems.shots_name(3) == "3-shot"


def test_names_outside_the_table():
    three = systems.get("3-shot")
    assert (three.kind, three.shots) == (systems.PROMPTED, 3)
    extra = systems.get("my-adapter")  # loaded with MAGNET_ADAPTERS=my-adapter=PATH
    assert extra.kind == systems.ADAPTER and extra.adapter == "my-adapter"
    assert systems.title("my-adapter") == "my-adapter" and systems.title("magnet") == "MAGNET"
    with pytest.raises(InputError, match="five-shot"):
        systems.get("many-shot")


def test_the_app_and_the_libraries_read_the_table():
    from app import model_calls, studies
    from magnet_model.evaluation import evaluate

    assert systems.for_task("infill") == studies.INFILL_SYSTEMS
    assert systems.for_task("continue") == model_calls.CONTINUE_SYSTEMS
    assert systems.for_task("search") == model_calls.SEARCH_SYSTEMS
    assert systems.for_task("evaluate") == evaluate.DEFAULT_SYSTEMS
    assert evaluate.PROMPTED == {0: "base zero-shot", 5: "base five-shot"}
