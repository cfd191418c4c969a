"""The experience tool domain: the nine tools of seeds 000 and 002, registered once."""

from __future__ import annotations

from loop.experience.export import (
    export_conversations,
    export_finalize,
    export_init,
    export_status,
    export_thoughts,
)
from loop.experience.guides import load_guide
from loop.experience.layout import resolve_in_roots
from loop.experience.listing import list_experiences
from loop.experience.models import (
    ConversationsInput,
    ConversationsOutput,
    DirectoryValidationResult,
    FinalizeOutput,
    GuideInput,
    GuideOutput,
    InitInput,
    InitOutput,
    ListInput,
    ListOutput,
    SessionInput,
    StatusOutput,
    ThoughtsInput,
    ThoughtsOutput,
    ValidateInput,
)
from loop.experience.validation import validate_directory
from loop.tools.base import BusRequest, BusService, Tool, ToolContext

__all__ = ["BUS", "DOMAIN", "TOOLS"]

DOMAIN = "experience"


def validate_experience(ctx: ToolContext, inp: ValidateInput) -> DirectoryValidationResult:
    """``validate_experience``: check a directory inside the configured roots."""
    return validate_directory(resolve_in_roots(ctx, inp.directory_path, what="directory_path"))


def export_guide(ctx: ToolContext, inp: GuideInput) -> GuideOutput:
    """``get_ai_experience_export_guide``: how a source AI writes good experience data."""
    return GuideOutput(guide_content=load_guide("export", inp.lang))


def import_guide(ctx: ToolContext, inp: GuideInput) -> GuideOutput:
    """``get_ai_experience_import_guide``: how a main AI assimilates an experience."""
    return GuideOutput(guide_content=load_guide("import", inp.lang))


TOOLS: list[Tool] = [
    Tool(
        name="get_export_status",
        domain=DOMAIN,
        description=(
            "Where an experience export stands, derived from its files: not_found, "
            "initializing, in_progress (any file, summary.json included) or completed, "
            "with created_files and next_batch_number (-1 once completed).\nCall it first "
            "when resuming an interrupted export."
        ),
        input_model=SessionInput,
        output_model=StatusOutput,
        func=export_status,
        read_only=True,
    ),
    Tool(
        name="export_experience_init",
        domain=DOMAIN,
        description=(
            "Start an experience export: create experiences/experience_<session_id>/ and "
            "record the summary (summary.json).\nRead get_ai_experience_export_guide first. "
            "Repeating the same init is safe; a different one for an existing session fails."
        ),
        input_model=InitInput,
        output_model=InitOutput,
        func=export_init,
    ),
    Tool(
        name="export_experience_conversations",
        domain=DOMAIN,
        description=(
            "Write one batch of 1-50 conversations (user_input, ai_response, reasoning) as "
            "conversations_NNN.json.\nBatch numbers run 1, 2, 3...; resending an identical "
            "batch is a safe retry, and different content overwrites the batch."
        ),
        input_model=ConversationsInput,
        output_model=ConversationsOutput,
        func=export_conversations,
    ),
    Tool(
        name="export_experience_thoughts",
        domain=DOMAIN,
        description=(
            "Write thoughts.json: insights, patterns, reflections, in any JSON object.\n"
            "The most valuable file for the importing AI; resending replaces it."
        ),
        input_model=ThoughtsInput,
        output_model=ThoughtsOutput,
        func=export_thoughts,
    ),
    Tool(
        name="export_experience_finalize",
        domain=DOMAIN,
        description=(
            "Finish an export: write manifest.json and remove summary.json.\n"
            "Needs init and at least one conversation batch; finalizing again is safe."
        ),
        input_model=SessionInput,
        output_model=FinalizeOutput,
        func=export_finalize,
    ),
    Tool(
        name="list_experiences",
        domain=DOMAIN,
        description=(
            "List finalized experiences with their manifest fields.\nFilters: ai_name, "
            "ai_context, main_topics (substrings), created_after, created_before (ISO), "
            "min_conversations, max_conversations."
        ),
        input_model=ListInput,
        output_model=ListOutput,
        func=list_experiences,
        read_only=True,
    ),
    Tool(
        name="validate_experience",
        domain=DOMAIN,
        description=(
            "Validate an experience directory: syntax, schema, semantic and cross-file "
            "checks.\nEach error names the file and the field."
        ),
        input_model=ValidateInput,
        output_model=DirectoryValidationResult,
        func=validate_experience,
        read_only=True,
    ),
    Tool(
        name="get_ai_experience_export_guide",
        domain=DOMAIN,
        description=(
            "The guide for a source AI: how to write good experience data and run the "
            "export.\nlang: en or ja."
        ),
        input_model=GuideInput,
        output_model=GuideOutput,
        func=export_guide,
        read_only=True,
    ),
    Tool(
        name="get_ai_experience_import_guide",
        domain=DOMAIN,
        description=(
            "The guide for a main AI: how to find, check and assimilate an experience while "
            "keeping its own identity.\nlang: en or ja."
        ),
        input_model=GuideInput,
        output_model=GuideOutput,
        func=import_guide,
        read_only=True,
    ),
]

# How hats request these tools with events (loop.tools.bus serves it); the answers go
# back to the requesting hat: experience.exported after a finalize, experience.status
# after any other request. experience.thought is data for the session export.
BUS = BusService(
    prefix="experience",
    source=DOMAIN,
    tools=TOOLS,
    requests=(
        BusRequest("init", "export_experience_init", "status"),
        BusRequest("conversations", "export_experience_conversations", "status"),
        BusRequest("thoughts", "export_experience_thoughts", "status"),
        BusRequest("finalize", "export_experience_finalize", "exported", bare="session_id"),
        BusRequest("get_status", "get_export_status", "status", bare="session_id"),
        BusRequest("list", "list_experiences", "status"),
        BusRequest("validate", "validate_experience", "status"),
    ),
    notices=("thought",),
)
