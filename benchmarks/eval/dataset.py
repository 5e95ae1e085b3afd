"""Long-memory evaluation sets: pydantic models, loaders and clear validation errors.

The native shape (``benchmarks/eval/devset.json``) is LongMemEval's, with the haystack
stored once and shared by the questions asked about it (as in LoCoMo)::

    {
      "name": "agtos-devset",
      "haystacks": [
        {
          "haystack_id": "h01",
          "haystack_session_ids": ["h01_s01", ...],
          "haystack_dates": ["2024/01/08 (Mon) 19:12", ...],
          "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...]
        }
      ],
      "questions": [
        {
          "question_id": "h01_q01", "haystack_id": "h01",
          "question_type": "knowledge-update",
          "question": "...", "answer": "...", "question_date": "2024/06/01 (Sat) 10:00",
          "answer_session_ids": ["h01_s05"],
          "superseded_session_ids": ["h01_s01"]
        }
      ]
    }

``superseded_session_ids`` (optional, our extension) names the sessions whose fact a later
gold session replaced: the harness scores whether the gold one ranks above them.

Two more shapes load into the same model:

* **LongMemEval** (``longmemeval_s.json`` …): a list of instances, each with its own
  ``haystack_session_ids`` / ``haystack_dates`` / ``haystack_sessions``; identical haystacks
  are stored (and ingested) once.
* **LoCoMo** (``locomo10.json``): a list of samples with ``conversation`` (``session_N``,
  ``session_N_date_time``, turns with ``speaker``/``dia_id``/``text``) and ``qa`` (``evidence``
  as ``"D3:5"`` dialogue ids → gold session ``session_3``). ``speaker_a`` becomes the user,
  ``speaker_b`` the assistant; turns keep the speaker as ``name``, their ``dia_id`` and
  ``timestamp``, and a shared photo's ``blip_caption`` after the text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DATE_FORMATS = (
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: 2023/05/20 (Sat) 02:21
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%I:%M %p on %d %B, %Y",  # LoCoMo: 1:56 pm on 8 May, 2023
    "%I:%M %p on %d %b, %Y",
)


class DatasetError(ValueError):
    """The file is not a usable evaluation set; the message says where and why."""


def parse_date(text: str) -> datetime:
    """A dataset date (LongMemEval, LoCoMo or ISO forms) as an aware UTC datetime."""
    value = " ".join(str(text).split())
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None:
        for fmt in DATE_FORMATS:
            try:
                parsed = datetime.strptime(value, fmt)
                break
            except ValueError:
                continue
    if parsed is None:
        raise ValueError(
            f"unrecognised date {text!r}: use e.g. '2024/01/08 (Mon) 19:12' (LongMemEval), "
            "'2024-01-08T19:12' (ISO) or '7:12 pm on 8 January, 2024' (LoCoMo)"
        )
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def date_ms(text: str) -> int:
    return int(parse_date(text).timestamp() * 1000)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class DatasetTurn(_Strict):
    """One message; ``has_answer`` marks turns that hold a question's evidence (LongMemEval).

    LoCoMo turns also carry the speaker's ``name``, their ``dia_id`` (``D<session>:<position>``)
    and, where the source has one, their own ``timestamp`` (any :func:`parse_date` form)."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    has_answer: bool = False
    name: str | None = None
    dia_id: str | None = None
    timestamp: str | None = None

    @field_validator("timestamp")
    @classmethod
    def _when(cls, value: str | None) -> str | None:
        if value is not None:
            parse_date(value)
        return value


class Haystack(_Strict):
    """One user's history: parallel lists of session ids, dates and sessions."""

    haystack_id: str = Field(min_length=1, max_length=200)
    haystack_session_ids: list[str] = Field(min_length=1)
    haystack_dates: list[str]
    haystack_sessions: list[list[DatasetTurn]]

    @model_validator(mode="after")
    def _consistent(self) -> Haystack:
        n = len(self.haystack_session_ids)
        if len(self.haystack_dates) != n or len(self.haystack_sessions) != n:
            raise ValueError(
                f"haystack_session_ids ({n}), haystack_dates ({len(self.haystack_dates)}) and "
                f"haystack_sessions ({len(self.haystack_sessions)}) must have the same length"
            )
        if any(not sid.strip() for sid in self.haystack_session_ids):
            raise ValueError("session ids must be non-empty")
        dupes = _duplicates(self.haystack_session_ids)
        if dupes:
            raise ValueError(f"duplicate session ids: {dupes[:5]}")
        for i, text in enumerate(self.haystack_dates):
            try:
                parse_date(text)
            except ValueError as exc:
                raise ValueError(f"haystack_dates[{i}] ({self.haystack_session_ids[i]}): {exc}") from None
        return self

    def session_timestamps_ms(self) -> list[int]:
        return [date_ms(d) for d in self.haystack_dates]


class Question(_Strict):
    question_id: str = Field(min_length=1, max_length=200)
    haystack_id: str = Field(min_length=1)
    question_type: str = Field(min_length=1, max_length=100)
    question: str = Field(min_length=1)
    answer: str = ""
    question_date: str | None = None
    answer_session_ids: list[str] = Field(default_factory=list)
    superseded_session_ids: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list, description="evidence turn ids, D<session>:<position>")

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_text(cls, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, list):
            return "; ".join(str(v) for v in value)
        return str(value)

    @field_validator("question_date")
    @classmethod
    def _date(cls, value: str | None) -> str | None:
        if value is not None:
            parse_date(value)
        return value

    @model_validator(mode="after")
    def _disjoint(self) -> Question:
        both = sorted(set(self.answer_session_ids) & set(self.superseded_session_ids))
        if both:
            raise ValueError(f"sessions {both} are both gold and superseded")
        return self


class Dataset(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    source_format: str = "haystacks"
    haystacks: list[Haystack] = Field(min_length=1)
    questions: list[Question] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> Dataset:
        problems: list[str] = []
        dupes = _duplicates(h.haystack_id for h in self.haystacks)
        if dupes:
            problems.append(f"duplicate haystack ids: {dupes[:5]}")
        dupes = _duplicates(q.question_id for q in self.questions)
        if dupes:
            problems.append(f"duplicate question ids: {dupes[:5]}")
        sessions = {h.haystack_id: set(h.haystack_session_ids) for h in self.haystacks}
        for i, q in enumerate(self.questions):
            where = f"questions[{i}] ({q.question_id})"
            if q.haystack_id not in sessions:
                problems.append(f"{where}: haystack_id {q.haystack_id!r} is not a haystack of this dataset")
                continue
            for field_name in ("answer_session_ids", "superseded_session_ids"):
                missing = [s for s in getattr(q, field_name) if s not in sessions[q.haystack_id]]
                if missing:
                    problems.append(f"{where}: {field_name} {missing} are not sessions of haystack {q.haystack_id!r}")
        if problems:
            more = f" (+{len(problems) - 20} more)" if len(problems) > 20 else ""
            raise ValueError("; ".join(problems[:20]) + more)
        return self

    def haystack(self, haystack_id: str) -> Haystack:
        return next(h for h in self.haystacks if h.haystack_id == haystack_id)

    def question_types(self) -> list[str]:
        return list(dict.fromkeys(q.question_type for q in self.questions))


# -- foreign shapes ---------------------------------------------------------------------
class LongMemEvalInstance(BaseModel):
    """One LongMemEval instance (unknown extra fields are ignored)."""

    model_config = ConfigDict(extra="ignore")

    question_id: str = Field(min_length=1)
    question_type: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: Any = ""
    question_date: str | None = None
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[DatasetTurn]]
    answer_session_ids: list[str] = Field(default_factory=list)


class LoCoMoTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    speaker: str
    dia_id: str = ""
    text: str = ""
    timestamp: str | None = None
    blip_caption: str | None = None

    def content(self) -> str:
        """The text, with a shared photo's caption after it (the only trace of the photo)."""
        caption = f"[shares a photo: {self.blip_caption.strip()}]" if (self.blip_caption or "").strip() else ""
        return " ".join(part for part in (self.text.strip(), caption) if part)


class LoCoMoQA(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str = Field(min_length=1)
    answer: Any = None
    adversarial_answer: Any = None
    evidence: list[str] = Field(default_factory=list)
    category: int | str = "unknown"


class LoCoMoSample(BaseModel):
    model_config = ConfigDict(extra="ignore")

    sample_id: str | int
    conversation: dict[str, Any]
    qa: list[LoCoMoQA]


def from_longmemeval(instances: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """LongMemEval instances → the native shape (one haystack per distinct history)."""
    parsed = [LongMemEvalInstance.model_validate(item) for item in instances]
    haystacks: dict[str, dict[str, Any]] = {}
    questions = []
    for inst in parsed:
        digest = hashlib.sha256(json.dumps([inst.haystack_session_ids, inst.haystack_dates]).encode()).hexdigest()[:12]
        hid = f"lme-{digest}"
        if hid not in haystacks:
            haystacks[hid] = {
                "haystack_id": hid,
                "haystack_session_ids": inst.haystack_session_ids,
                "haystack_dates": inst.haystack_dates,
                "haystack_sessions": [[t.model_dump() for t in s] for s in inst.haystack_sessions],
            }
        questions.append(
            {
                "question_id": inst.question_id,
                "haystack_id": hid,
                "question_type": inst.question_type + ("-abstention" if inst.question_id.endswith("_abs") else ""),
                "question": inst.question,
                "answer": inst.answer,
                "question_date": inst.question_date,
                "answer_session_ids": inst.answer_session_ids,
            }
        )
    return {"name": name, "source_format": "longmemeval", "haystacks": list(haystacks.values()), "questions": questions}


_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D(\d+):\d+")


def from_locomo(samples: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """LoCoMo samples → the native shape: one haystack per sample, evidence D<n>:<m> → session n."""
    haystacks, questions = [], []
    for sample in (LoCoMoSample.model_validate(s) for s in samples):
        conv = sample.conversation
        sid = str(sample.sample_id)
        speaker_a = str(conv.get("speaker_a", ""))
        numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
        ids, dates, sessions = [], [], []
        for n in numbers:
            turns = [LoCoMoTurn.model_validate(t) for t in conv[f"session_{n}"]]
            ids.append(f"{sid}_session_{n}")
            dates.append(str(conv.get(f"session_{n}_date_time", "")))
            sessions.append(
                [
                    {
                        "role": "user" if t.speaker == speaker_a else "assistant",
                        "content": t.content(),
                        "name": t.speaker,
                        "dia_id": t.dia_id or None,
                        "timestamp": t.timestamp,
                    }
                    for t in turns
                    if t.content()
                ]
            )
        haystacks.append(
            {"haystack_id": sid, "haystack_session_ids": ids, "haystack_dates": dates, "haystack_sessions": sessions}
        )
        known = set(ids)
        for i, qa in enumerate(sample.qa):
            gold = list(dict.fromkeys(f"{sid}_session_{m}" for ev in qa.evidence for m in _DIA_ID.findall(ev)))
            questions.append(
                {
                    "question_id": f"{sid}_q{i:03d}",
                    "haystack_id": sid,
                    "question_type": f"locomo-category-{qa.category}",
                    "question": qa.question,
                    "answer": qa.answer if qa.answer is not None else qa.adversarial_answer,
                    "answer_session_ids": [g for g in gold if g in known],
                    "evidence": qa.evidence,
                }
            )
    return {"name": name, "source_format": "locomo", "haystacks": haystacks, "questions": questions}


# -- loading ----------------------------------------------------------------------------
def parse_dataset(raw: Any, name: str = "dataset") -> Dataset:
    """Validate any supported shape; raises :class:`DatasetError` listing what is wrong."""
    try:
        if isinstance(raw, dict):
            data = {"name": name, **raw} if "name" not in raw else raw
        elif isinstance(raw, list) and raw and isinstance(raw[0], dict) and "haystack_sessions" in raw[0]:
            data = from_longmemeval(raw, name)
        elif isinstance(raw, list) and raw and isinstance(raw[0], dict) and "conversation" in raw[0]:
            data = from_locomo(raw, name)
        else:
            raise DatasetError(
                f"{name}: expected an object with 'haystacks' and 'questions', a LongMemEval list "
                "(items with 'haystack_sessions') or a LoCoMo list (items with 'conversation' and 'qa')"
            )
        return Dataset.model_validate(data)
    except ValidationError as exc:
        raise DatasetError(format_validation_error(name, exc)) from None


def load_dataset(path: str | Path) -> Dataset:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON: {exc}") from None
    return parse_dataset(raw, path.stem)


def format_validation_error(name: str, exc: ValidationError, limit: int = 15) -> str:
    lines = []
    for err in exc.errors()[:limit]:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc or '(top level)'}: {msg}")
    more = exc.error_count() - limit
    tail = [f"  … and {more} more"] if more > 0 else []
    return "\n".join([f"{name}: invalid dataset ({exc.error_count()} problem(s)):", *lines, *tail])


def _duplicates(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dupes: list[str] = []
    for item in items:
        if item in seen and item not in dupes:
            dupes.append(item)
        seen.add(item)
    return dupes
