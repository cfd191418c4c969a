"""autogen-core: two routed agents publishing to each other's topic; recording = publish hook."""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from autogen_core import (
    DefaultInterventionHandler,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    message_handler,
)

from bench.stats import Stamps


@dataclass
class Ping:
    """The ping message."""

    n: int


@dataclass
class Pong:
    """The pong message."""

    n: int


class _Shared:
    limit = 0
    stamps = Stamps()


class PingAgent(RoutedAgent):
    """Answers a pong with a ping."""

    def __init__(self) -> None:
        super().__init__("ping")

    @message_handler
    async def on_pong(self, message: Pong, ctx: MessageContext) -> None:
        """One ping transition."""
        _Shared.stamps.hit()
        if message.n + 1 < _Shared.limit:
            await self.publish_message(Ping(message.n + 1), TopicId("ping", "default"))


class PongAgent(RoutedAgent):
    """Answers a ping with a pong."""

    def __init__(self) -> None:
        super().__init__("pong")

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        """One pong transition."""
        _Shared.stamps.hit()
        if message.n + 1 < _Shared.limit:
            await self.publish_message(Pong(message.n + 1), TopicId("pong", "default"))


class PublishRecorder(DefaultInterventionHandler):
    """Writes every published message as one JSON line (the runtime's publish hook)."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh

    async def on_publish(self, message: Any, *, message_context: MessageContext) -> Any:
        """Record, then let the message through unchanged."""
        self.fh.write(
            json.dumps(
                {
                    "type": type(message).__name__,
                    "message": asdict(message),
                    "topic": str(message_context.topic_id),
                    "sender": str(message_context.sender),
                }
            )
            + "\n"
        )
        return message


async def _main(n: int, record: bool, out: Path) -> None:
    _Shared.limit = n
    _Shared.stamps = Stamps()
    with out.open("w", encoding="utf-8") as fh:
        runtime = SingleThreadedAgentRuntime(
            intervention_handlers=[PublishRecorder(fh)] if record else None
        )
        await PingAgent.register(runtime, "pinger", PingAgent)
        await PongAgent.register(runtime, "ponger", PongAgent)
        await runtime.add_subscription(TypeSubscription(topic_type="pong", agent_type="pinger"))
        await runtime.add_subscription(TypeSubscription(topic_type="ping", agent_type="ponger"))
        runtime.start()
        await runtime.publish_message(Ping(0), TopicId("ping", "default"))
        await runtime.stop_when_idle()


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Run the ping-pong bare or with the publish hook writing JSONL."""
    with tempfile.TemporaryDirectory(prefix="bench-autogen-") as tmp:
        asyncio.run(
            _main(int(params["n"]), params["mode"] == "publish_hook", Path(tmp) / "published.jsonl")
        )
    return _Shared.stamps.result()
