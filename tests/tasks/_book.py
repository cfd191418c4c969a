"""A tiny driver over the pure operations, with readable ids (``t1``, ``t2``...)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from loop.tasks import execution, operations
from loop.tasks.models import (
    CompleteTaskOutput,
    CreateTaskOutput,
    DeleteTaskOutput,
    StartTaskOutput,
    Task,
    UpdateTaskOutput,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Book:
    """Holds a task list and applies operations to it, keeping the new list."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self.n = 0
        self.tick = 0

    def now(self) -> datetime:
        """A clock that moves one second per call."""
        self.tick += 1
        return T0 + timedelta(seconds=self.tick)

    def create(
        self,
        name: str,
        parent: str | None = None,
        order: int | None = None,
        description: str | None = None,
    ) -> CreateTaskOutput:
        """createTask with the next ``tN`` id."""
        self.n += 1
        self.tasks, out = operations.create(
            self.tasks,
            name=name,
            description=description,
            parent_id=parent,
            order=order,
            new_id=f"t{self.n}",
            now=self.now(),
        )
        return out

    def add(self, name: str, parent: str | None = None, order: int | None = None) -> str:
        """Create a task and return its id."""
        return self.create(name, parent, order).task.id

    def start(self, task_id: str) -> StartTaskOutput:
        """startTask."""
        self.tasks, out = execution.start(self.tasks, task_id, now=self.now())
        return out

    def complete(self, task_id: str, resolution: str = "done") -> CompleteTaskOutput:
        """completeTask."""
        self.tasks, out = execution.complete(self.tasks, task_id, resolution, now=self.now())
        return out

    def update(self, task_id: str, **kwargs: Any) -> UpdateTaskOutput:
        """updateTask with keyword fields."""
        self.tasks, out = operations.update(self.tasks, task_id, now=self.now(), **kwargs)
        return out

    def delete(self, task_id: str, cascade: bool = False) -> DeleteTaskOutput:
        """deleteTask."""
        self.tasks, out = operations.delete(self.tasks, task_id, cascade=cascade)
        return out

    def get(self, task_id: str) -> Task:
        """The current version of a task."""
        return next(t for t in self.tasks if t.id == task_id)

    def status(self, task_id: str) -> str:
        """The current status of a task."""
        return self.get(task_id).status

    def order(self, task_id: str) -> int:
        """The current order of a task."""
        return self.get(task_id).order
