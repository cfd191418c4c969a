"""ToolsOnBus: one request, result and error convention for every domain's tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from loop.bus import EventBus
from loop.errors import StoreError, ToolError
from loop.events import Event
from loop.tools.base import BusRequest, BusService, Tool, ToolContext
from loop.tools.bus import ToolsOnBus, request_input


class Echo(BaseModel):
    id: str = ""
    n: int = 0


def _echo(ctx: ToolContext, inp: Echo) -> Echo:
    if inp.id == "missing":
        raise ToolError("thing_not_found", "no thing 'missing'", details={"id": "missing"})
    if inp.id == "corrupt":
        raise StoreError("invalid JSON", file="things.json")
    if inp.id == "bug":
        raise RuntimeError("secret internals")
    return inp


TOOLS = [
    Tool("getThing", "things", "get a thing", Echo, Echo, _echo, read_only=True),
    Tool("makeThing", "things", "make a thing", Echo, Echo, _echo),
]
SERVICE = BusService(
    prefix="thing",
    source="things",
    tools=TOOLS,
    requests=(
        BusRequest("get", "getThing", "found", bare="id"),
        BusRequest("make", "makeThing", "made"),
    ),
    notices=("note",),
)


def _wire(tmp_path: Path, service: BusService = SERVICE) -> tuple[EventBus, list[Event]]:
    bus = EventBus()
    ToolsOnBus(ToolContext(root=tmp_path), service).attach(bus)
    seen: list[Event] = []
    bus.subscribe("thing.*", seen.append, name="capture")
    return bus, seen


def _answers(seen: list[Event]) -> list[Event]:
    return [e for e in seen if e.source == "things"]


async def test_a_result_is_the_tools_output_addressed_to_the_requester(tmp_path: Path) -> None:
    """The result topic carries the tool's output as JSON, to the hat that asked."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.make", {"id": "a", "n": 2}, source="builder"))
    [answer] = _answers(seen)
    assert (answer.topic, answer.payload, answer.target) == (
        "thing.made",
        {"id": "a", "n": 2},
        "builder",
    )


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ('{"id": "a"}', {"id": "a", "n": 0}),  # JSON text of an object
        ("  b  ", {"id": "b", "n": 0}),  # a bare id, where the request takes one
        ("", {"id": "", "n": 0}),  # blank is {}
        (None, {"id": "", "n": 0}),  # null is {}
    ],
)
async def test_payloads_that_are_a_tool_input(
    tmp_path: Path, payload: object, expected: dict[str, object]
) -> None:
    """An object, JSON text of one, a bare id, blank and null are all inputs."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.get", payload, source="builder"))
    assert [(e.topic, e.payload) for e in _answers(seen)] == [("thing.found", expected)]


async def test_errors_carry_the_request_the_tool_and_the_errors_own_code(
    tmp_path: Path,
) -> None:
    """A refused call, a store problem, a bad payload and an unknown action each answer
    <prefix>.error with {request, tool, error}: the error's own code, never a catch-all."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.get", "missing", source="hat"))
    await bus.publish(Event("thing.get", "corrupt", source="hat"))
    await bus.publish(Event("thing.make", "not json", source="hat"))
    await bus.publish(Event("thing.make", "[1, 2]", source="hat"))
    await bus.publish(Event("thing.dance", {}, source="hat"))
    errors = _answers(seen)
    assert {e.topic for e in errors} == {"thing.error"} and {e.target for e in errors} == {"hat"}
    assert [
        (e.payload["request"], e.payload["tool"], e.payload["error"]["code"]) for e in errors
    ] == [
        ("thing.get", "getThing", "thing_not_found"),
        ("thing.get", "getThing", "store_error"),
        ("thing.make", "makeThing", "invalid_payload"),
        ("thing.make", "makeThing", "invalid_payload"),
        ("thing.dance", None, "unknown_request"),
    ]
    assert errors[0].payload["error"]["details"] == {"id": "missing"}
    assert errors[4].payload["error"]["details"] == {"known": ["thing.get", "thing.make"]}


async def test_a_bug_still_answers_the_requester_without_its_text(tmp_path: Path) -> None:
    """A tool that crashes answers internal_error (logged), so the hat is never left waiting."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.get", "bug", source="hat"))
    [answer] = _answers(seen)
    assert answer.payload["error"]["code"] == "internal_error"
    assert "secret" not in answer.payload["error"]["message"]
    assert bus.stats.failures == 0


async def test_the_tool_name_works_as_the_action(tmp_path: Path) -> None:
    """thing.makeThing is thing.make; JSON text null is {} too."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.makeThing", "null", source="hat"))
    assert [(e.topic, e.payload) for e in _answers(seen)] == [("thing.made", {"id": "", "n": 0})]


async def test_answers_notices_and_the_loops_events_are_not_requests(tmp_path: Path) -> None:
    """Result topics, errors, notices, the domain's own events and the loop's are ignored."""
    bus, seen = _wire(tmp_path)
    for topic, source in [
        ("thing.found", "hat"),
        ("thing.error", "hat"),
        ("thing.note", "hat"),
        ("thing.make", "things"),
        ("thing.make", "loop"),
    ]:
        await bus.publish(Event(topic, {}, source=source))
    assert len(seen) == 5  # only the events published here went by


async def test_a_shared_domain_answers_every_subscriber(tmp_path: Path) -> None:
    """reply_to_requester=False: results and errors are not addressed to anyone."""
    shared = BusService("thing", "things", TOOLS, SERVICE.requests, reply_to_requester=False)
    bus, seen = _wire(tmp_path, shared)
    await bus.publish(Event("thing.make", {}, source="hat"))
    await bus.publish(Event("thing.get", "missing", source="hat"))
    assert [(e.topic, e.target) for e in _answers(seen)] == [
        ("thing.made", None),
        ("thing.error", None),
    ]


def test_a_service_is_checked_when_it_is_served(tmp_path: Path) -> None:
    """A request naming no tool, or an answer topic that is also a request, is refused."""
    ctx = ToolContext(root=tmp_path)
    with pytest.raises(ValueError, match="no tool"):
        ToolsOnBus(ctx, BusService("thing", "things", TOOLS, (BusRequest("x", "nope", "y"),)))
    clash = (BusRequest("get", "getThing", "make"), BusRequest("make", "makeThing", "made"))
    with pytest.raises(ValueError, match="both request and answer"):
        ToolsOnBus(ctx, BusService("thing", "things", TOOLS, clash))


def test_request_input_refuses_deep_json_text() -> None:
    """JSON text nested past the input depth is an invalid_payload, not a crash."""
    deep = '{"a": ' * 200 + "1" + "}" * 200
    with pytest.raises(ToolError) as info:
        request_input(deep, topic="thing.make", tool="makeThing")
    assert info.value.code == "invalid_payload"


async def test_text_utf8_cannot_store_is_invalid_input_naming_the_field(tmp_path: Path) -> None:
    """A payload whose JSON text spells a lone surrogate (valid JSON that no file can
    store) is answered invalid_input naming the field, as over MCP and the CLI."""
    bus, seen = _wire(tmp_path)
    await bus.publish(Event("thing.make", '{"id": "\\ud800"}', source="hat"))
    [answer] = _answers(seen)
    assert answer.topic == "thing.error"
    assert answer.payload["error"]["code"] == "invalid_input"
    assert [d["field"] for d in answer.payload["error"]["details"]] == ["id"]
    assert "\\ud800" in answer.payload["error"]["message"]  # escaped: a reply can carry it
