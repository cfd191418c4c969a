"""The bus adapter: a domain's tools served to hats as events, one convention for all.

A hat requests a tool by publishing ``<prefix>.<action>`` (``task.create``,
``theme.start``, ``experience.finalize``; the tool's own name works as the action too)
with the tool's input as the payload: a JSON object, or JSON text of one. A blank
payload or ``null`` is ``{}``; a request that takes one id also takes it bare
(``task.get 9f6a…``). :class:`ToolsOnBus` runs the tool (in a worker thread: the tools
do blocking file I/O) and publishes exactly one answer, from the domain's source:

* the result ``<prefix>.<result>`` (``task.created``), whose payload is the tool's
  output, the same JSON that MCP and ``--json`` return;
* or ``<prefix>.error`` with ``{"request": topic, "tool": name, "error": {"code",
  "message", "details"}}``: the error's own code (:mod:`loop.errors`), ``invalid_payload``
  for a payload that is not a JSON object, ``unknown_request`` for an action the domain
  does not serve, ``internal_error`` for a bug (logged with its traceback).

Answers go to the requesting hat, or to every subscriber when the domain says so
(:attr:`~loop.tools.base.BusService.reply_to_requester`). Events from the loop itself
(a starting event called ``task.start``) and from the domain, its result topics,
``<prefix>.error`` and its notices are never requests, so a domain cannot answer itself.

A domain that ``loop.toml`` turns off (``[tasks] enabled = false``) serves no tool, yet
its requests are answered all the same: :class:`TurnedOff` answers each with
``<prefix>.error``, code ``domain_off``, addressed as the domain addresses its answers.
It imports the domain's :class:`~loop.tools.base.BusService` only when a request comes,
so a loop with its domains off starts without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import structlog

from loop import _json
from loop.bus import EventBus
from loop.errors import InternalError, LoopError, ToolError
from loop.events import Event
from loop.extensions import Extension
from loop.tools.base import BusRequest, BusService, Tool, ToolContext

__all__ = [
    "DOMAIN_OFF",
    "ERROR",
    "ToolsOnBus",
    "TurnedOff",
    "error_answer",
    "is_request",
    "reply",
    "request_input",
]

log = structlog.get_logger(__name__)

ERROR = "error"  # the last segment of every domain's error topic
LOOP_SOURCE = "loop"  # the loop's own events are never requests
DOMAIN_OFF = "domain_off"  # the code of the answer to a request to a domain turned off


def request_input(
    payload: Any, *, topic: str, tool: str, bare: str | None = None
) -> dict[str, Any]:
    """The tool input a request's payload carries.

    Args:
        payload: the event's payload.
        topic: the request topic (for the messages).
        tool: the tool's name (for the messages).
        bare: the input field that a bare word fills, if the request takes one.

    Raises:
        ToolError: ``invalid_payload``: invalid JSON text, or a value that is not an object.
    """
    if isinstance(payload, str):
        text = payload.strip()
        if not text:
            return {}
        if bare is not None and not text.startswith("{"):
            return {bare: text}
        try:
            payload = _json.loads(text, max_depth=_json.INPUT_DEPTH)
        except ValueError as exc:
            raise ToolError(
                "invalid_payload",
                f"{topic}: the payload is not valid JSON ({_json.error_text(exc)}); "
                f"send the {tool} arguments as a JSON object",
            ) from exc
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise ToolError(
            "invalid_payload",
            f"{topic} needs a JSON object payload with the {tool} arguments, "
            f"not {type(payload).__name__}",
        )
    return payload


def is_request(service: BusService, event: Event) -> bool:
    """Whether ``event`` asks ``service`` for something: a ``<prefix>.*`` event from a hat
    that is none of the domain's answers (its results, ``<prefix>.error``) or notices."""
    if event.source in (LOOP_SOURCE, service.source):
        return False
    action = event.topic.split(".", 1)[1]
    return action not in {ERROR, *service.notices, *(r.result for r in service.requests)}


def error_answer(
    service: BusService, topic: str, tool: str | None, exc: LoopError
) -> tuple[str, dict[str, Any]]:
    """The domain's answer to the request ``topic`` that failed with ``exc``: its topic
    (``<prefix>.error``) and payload (the request, the tool, the error)."""
    return f"{service.prefix}.{ERROR}", {"request": topic, "tool": tool, **exc.to_dict()}


async def reply(
    bus: EventBus, service: BusService, request: Event, topic: str, payload: dict[str, Any]
) -> None:
    """Publish the domain's answer to ``request``, from the domain's source, addressed as
    its answers are (to the requesting hat, or to every subscriber)."""
    target = request.source if service.reply_to_requester else None
    await bus.publish(Event(topic=topic, payload=payload, source=service.source, target=target))


class ToolsOnBus(Extension):
    """Serves one domain's tools (a :class:`~loop.tools.base.BusService`) on the bus."""

    def __init__(self, ctx: ToolContext, service: BusService) -> None:
        self.ctx = ctx
        self.service = service
        self.name = f"{service.source}-requests"
        self._tools: dict[str, Tool] = {t.name: t for t in service.tools}
        self._requests: dict[str, BusRequest] = {}
        for request in service.requests:
            if request.tool not in self._tools:
                raise ValueError(f"{service.prefix}.{request.action}: no tool {request.tool!r}")
            self._requests[request.action] = request
            self._requests.setdefault(request.tool, request)
        answers = {ERROR, *service.notices, *(r.result for r in service.requests)}
        if clash := answers & set(self._requests):
            raise ValueError(f"{service.prefix}: {sorted(clash)} both request and answer")
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``<prefix>.*``."""
        self._bus = bus
        bus.subscribe(f"{self.service.prefix}.*", self._on_event, name=self.name)

    async def _on_event(self, event: Event) -> None:
        if not is_request(self.service, event):
            return
        request = self._requests.get(event.topic.split(".", 1)[1])
        topic, payload = await self.answer(event.topic, request, event.payload)
        if self._bus is not None:
            await reply(self._bus, self.service, event, topic, payload)

    async def answer(
        self, topic: str, request: BusRequest | None, payload: Any
    ) -> tuple[str, dict[str, Any]]:
        """Run ``request`` on ``payload``; return the answer's topic and payload."""
        if request is None:
            return self._error(topic, None, self._unknown(topic))
        try:
            args = request_input(payload, topic=topic, tool=request.tool, bare=request.bare)
            run = self._tools[request.tool].run
            result = await anyio.to_thread.run_sync(run, self.ctx, args)
        except LoopError as exc:
            return self._error(topic, request.tool, exc)
        except Exception:
            log.exception("bus request crashed", request=topic)
            bug = InternalError(f"{topic} failed unexpectedly; see the log")
            return self._error(topic, request.tool, bug)
        body = result.model_dump(mode="json", by_alias=True)
        return f"{self.service.prefix}.{request.result}", body

    def _error(self, topic: str, tool: str | None, exc: LoopError) -> tuple[str, dict[str, Any]]:
        log.info("bus request failed", request=topic, code=exc.code)
        return error_answer(self.service, topic, tool, exc)

    def _unknown(self, topic: str) -> ToolError:
        known = sorted(r.action for r in self.service.requests)
        return ToolError(
            "unknown_request",
            f"{topic} is not a request; use one of {', '.join(known)}",
            details={"known": [f"{self.service.prefix}.{a}" for a in known]},
        )


class TurnedOff(Extension):
    """Answers the requests of a domain turned off in ``loop.toml``, so that none is left
    unanswered: each gets ``<prefix>.error`` with the code ``domain_off``, from the
    domain's source, addressed as the domain's own answers are (to the requesting hat, or
    to every subscriber), and a warning in the log.

    Args:
        prefix: the domain's topics' first segment (``task``): what it listens to.
        section: the domain's section in ``loop.toml`` (``tasks``), for the message.
        load: the domain's bus service, called on the first event: the domain is
            imported only when a hat asks it for something.
    """

    def __init__(self, prefix: str, section: str, load: Callable[[], BusService]) -> None:
        self.prefix = prefix
        self.section = section
        self.name = f"{section}-off"
        self._load = load
        self._service: BusService | None = None
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``<prefix>.*``."""
        self._bus = bus
        bus.subscribe(f"{self.prefix}.*", self._on_event, name=self.name)

    def service(self) -> BusService:
        """The domain's bus service (imported on the first call)."""
        if self._service is None:
            self._service = self._load()
        return self._service

    async def _on_event(self, event: Event) -> None:
        if event.source == LOOP_SOURCE:  # never a request: the domain stays unimported
            return
        service = self.service()
        if not is_request(service, event):
            return
        why = ToolError(
            DOMAIN_OFF,
            f"{event.topic}: the {self.section} domain is off ([{self.section}] enabled = "
            "false in loop.toml); nothing was done",
        )
        log.warning("bus request refused", request=event.topic, hat=event.source, why=why.message)
        if self._bus is not None:
            topic, payload = error_answer(service, event.topic, None, why)
            await reply(self._bus, service, event, topic, payload)
