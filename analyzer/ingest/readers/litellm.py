"""LiteLLM ``StandardLoggingPayload`` logs (JSONL, one payload per line).

The payload is ``kwargs["standard_logging_object"]`` of a LiteLLM callback
(BerriAI/litellm ``litellm/types/utils.py``); a line may hold it bare or wrapped
as ``{"standard_logging_object": {...}}``. Mapping:

* ``messages`` (OpenAI shape, as sent) → messages; ``model_parameters.tools`` →
  tools (``model_parameters`` is every request param except the prompt);
* Anthropic's top-level ``system``, when an older LiteLLM kept it in
  ``model_parameters.system``, becomes the leading system messages; newer
  versions drop it, which is noted for Anthropic calls without a system message;
* usage from ``response.usage`` (provider cache fields included), else the
  payload's ``prompt_tokens``/``completion_tokens``; time from ``startTime``;
* non-chat calls (embeddings, images...) are skipped as notes (``bad=False``);
  failed calls are kept with a note (the prompt was sent).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.readers.anthropic import system_of
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import head_fields, reader
from prefixcache.analyzer.ingest.jsonio import expect, field, parse_time, parse_usage, read_records, skip
from prefixcache.analyzer.ingest.readers.openai_chat import EXTRA_KEYS, messages_of, notes_for, tool_of

FORMAT = "litellm"
#: StandardLoggingPayload fields that, with ``call_type``, identify a LiteLLM payload.
_LITELLM_KEYS = {"model_parameters", "model_group", "model_id", "custom_llm_provider", "hidden_params", "api_base"}
_CHAT_CALLS = {"completion", "acompletion", "anthropic_messages", "responses", "aresponses", "", None}


@reader(priority=20)
class LiteLLMReader:
    """Reader for LiteLLM StandardLoggingPayload JSONL."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.9 for a payload with ``model_parameters`` and LiteLLM bookkeeping fields."""
        obj = head_fields(head)
        obj = obj["standard_logging_object"] if isinstance(obj.get("standard_logging_object"), dict) else obj
        if "call_type" in obj and obj.keys() & _LITELLM_KEYS:
            return 0.9
        return 0.0

    def parse(self, record: Any, prov: Provenance) -> Iterator[Request | Skipped]:
        expect(record, dict, "")
        if isinstance(record.get("standard_logging_object"), dict):
            record = record["standard_logging_object"]
        call_type = field(record, "call_type", str)
        if call_type not in _CHAT_CALLS:
            yield skip(prov.source, prov.record, f"not a chat call (call_type {call_type!r})", field="call_type", bad=False)
            return
        params = field(record, "model_parameters", dict, default={})
        messages = list(messages_of(record.get("messages"), "messages"))
        notes = list(notes_for(tuple(messages)))
        if params.get("system") is not None:
            messages[:0] = [_repath(m, "model_parameters.") for m in system_of(params["system"])]
        provider = field(record, "custom_llm_provider", str, default="")
        if provider == "anthropic" and not any(m.role == "system" for m in messages):
            notes.append("no system prompt logged: newer LiteLLM drops Anthropic's top-level system")
        tools = tuple(tool_of(t, f"model_parameters.tools[{i}]")
                      for i, t in enumerate(field(params, "tools", list, "model_parameters", default=[])))
        response = record.get("response")  # a dict, or text / a list for streamed and failed calls
        response = response if isinstance(response, dict) else {}
        usage = parse_usage(response.get("usage"), "response.usage")
        if usage is None and record.get("prompt_tokens") is not None:
            usage = Usage(field(record, "prompt_tokens", int), None, None, field(record, "completion_tokens", int))
            notes.append("usage from the payload totals: no provider cache fields")
        if field(record, "status", str) == "failure":
            notes.append(f"call failed: {str(record.get('error_str') or '')[:120]}")
        ts = parse_time(record.get("startTime"), "startTime")
        model = field(record, "model", str) or field(response, "model", str, "response")
        extra = {k: params[k] for k in EXTRA_KEYS if params.get(k) is not None}
        extra.update({k: record[k] for k in ("id", "trace_id", "custom_llm_provider", "status", "end_user",
                                             "request_tags") if record.get(k)})
        meta = record.get("metadata")
        keys = {k: meta[k] for k in ("user_api_key_team_id", "user_api_key_user_id")
                if isinstance(meta, dict) and meta.get(k)}
        if keys and "metadata" not in extra:  # the proxy's tenant (team, key owner): lint.tenants reads it
            extra["metadata"] = keys
        observed = {"messages", "tools", "system"} | {k for k, v in (("usage", usage), ("timestamp", ts),
                                                                      ("model", model)) if v is not None}
        yield Request("", 0, FORMAT, prov, tuple(messages), tools, model, ts, usage, frozenset(observed),
                      tuple(notes), extra=extra)

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        return read_records(source, self.parse)


def _repath(m: Message, prefix: str) -> Message:
    return replace(m, path=prefix + m.path)
