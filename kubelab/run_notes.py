"""Tags and a note a user adds to a run after it started, and the trial's own tracking file.

They live in the run's `notes.json` (`RUN_FILES["notes"]`), not in `spec.json`: the spec is
what was submitted and stays so. Once edited, `notes.json` holds the run's whole tag list, so
`kubelab tag RUN -b` can remove a tag the spec gave. Only the standard library: the runner
imports `records`, which imports this module.
"""

from __future__ import annotations

import re
from typing import Any

from kubelab.errors import FieldError, ValidationError

MAX_TAGS, MAX_TAG, MAX_NOTE = 100, 100, 10_000
TAG = re.compile(r"^[^\s,|:()\"'\\]+$")  # a word PQL's `tags:` can name without quoting


def checked_tracking(data: Any) -> dict[str, Any]:
    """`tracking.json` as the record reads it: scalar params/outputs and string tags only."""
    if not isinstance(data, dict):
        return {}
    scalar = (str, int, float, bool, type(None))
    result: dict[str, Any] = {}
    for section in ("params", "outputs"):
        values = data.get(section)
        if isinstance(values, dict):
            result[section] = {str(k): v for k, v in values.items() if isinstance(v, scalar)}
    tags = data.get("tags")
    if isinstance(tags, list):
        result["tags"] = [t for t in tags if isinstance(t, str) and t]
    return result


def checked_notes(data: Any) -> dict[str, Any]:
    """`notes.json` as the record reads it: `tags` (a list of strings) and `note` (a string)."""
    if not isinstance(data, dict):
        return {}
    result: dict[str, Any] = {}
    if isinstance(data.get("tags"), list):
        result["tags"] = [t for t in data["tags"] if isinstance(t, str) and t]
    if isinstance(data.get("note"), str):
        result["note"] = data["note"]
    return result


def parse_tag_edits(words: list[str]) -> tuple[list[str], list[str]]:
    """`+a -b c` as (to add, to remove); a word without a sign adds."""
    add: list[str] = []
    remove: list[str] = []
    for word in words:
        if not isinstance(word, str):
            raise ValidationError("invalid tags", [FieldError("tags", "each edit must be a string")])
        sign, tag = (word[0], word[1:]) if word[:1] in "+-" and len(word) > 1 else ("+", word)
        (add if sign == "+" else remove).append(tag)
    return add, remove


def edited_tags(current: list[str], add: list[str], remove: list[str]) -> list[str]:
    """The tag list after the edits, or a ValidationError naming the bad tag (nothing changes)."""
    for tag in (*add, *remove):
        if not isinstance(tag, str) or not TAG.match(tag) or len(tag) > MAX_TAG:
            reason = (
                f"{tag!r} is not a tag: up to {MAX_TAG} characters, no spaces, commas, quotes, "
                "'|', ':', '(' or ')'"
            )
            raise ValidationError("invalid tags", [FieldError("tags", reason)])
    gone = set(remove)
    tags = [t for t in dict.fromkeys([*current, *add]) if t not in gone]
    if len(tags) > MAX_TAGS:
        raise ValidationError("invalid tags", [FieldError("tags", f"a run holds at most {MAX_TAGS} tags")])
    return tags


def checked_note(note: Any) -> str:
    if not isinstance(note, str):
        raise ValidationError("invalid note", [FieldError("note", "must be a string")])
    if len(note) > MAX_NOTE:
        raise ValidationError("invalid note", [FieldError("note", f"is over {MAX_NOTE} characters")])
    return note
