#!/usr/bin/env python3
"""Writes the expected chat-template renderings and token counts that mlperf/tests/templates.rs
checks tokentap against, produced by the reference's own Python stack.

Run it with the Python environment of the pinned reference client (mlcommons/endpoints ea33275,
`pip install -e` of it: transformers 5.5.0, jinja2 3.1.6, tokenizers 0.22):

    /path/to/venv/bin/python scripts/reference-fixtures.py

Nothing here runs in CI: the outputs are committed under mlperf/tests/fixtures/ and the Rust
tests read them. For every template in mlperf/tests/fixtures/templates/*.jinja and every case
below, the template is rendered exactly as `tokenizer.apply_chat_template` renders it
(transformers' `render_jinja_template`, with the tokenizer's special tokens and the request's
`chat_template_kwargs`); a template that raises records the error instead. The token counts use
the golden tokenizer (testdata/golden) with the reference's `BatchTokenizer` counting code,
including its fallbacks, on a copy whose chat template is replaced by each fixture template.
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from transformers.utils.chat_template_utils import render_jinja_template

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "mlperf/tests/fixtures/templates"
OUT = ROOT / "mlperf/tests/fixtures/template_cases.json"
GOLDEN_TOKENIZER = ROOT / "testdata/golden/mlperf-ea33275/tokenizer"

SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": "[BOS]"}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command. Output over 10 kB is cut; <stdin> & \"quotes\" are fine.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command."},
                    "timeout": {"type": "number", "minimum": 0.5, "default": 1e-05},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Finds an order — by id (ünïcödé ok).",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "integer"},
                    "strict": {"type": "boolean", "enum": [True, False]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
]

CALL = {
    "id": "functions.bash:0",
    "type": "function",
    "function": {
        "name": "bash",
        "arguments": {"command": "cd /testbed && python -m pytest -x 'tests/a b.py' | tail -5", "timeout": 30.0, "env": {}},
    },
}
CALL2 = {
    "id": "call_2",
    "type": "function",
    "function": {"name": "lookup_order", "arguments": {"order_id": 12, "strict": True, "tags": ["é", "x\ny"], "ratio": 2.5e-07}},
}
RAW_CALL = {"id": "call_3", "type": "function", "function": {"name": "bash", "arguments": "not json {"}}

SYSTEM = "[salt: 4461]\n\nYou are a careful agent.\nFollow the policy.\n\n[salt: 1bd4]"


def conversation():
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Fix the failing test in tests/test_io.py."},
        {"role": "assistant", "reasoning_content": "Look at the tests first.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "functions.bash:0", "content": "1 failed, 3 passed\n<truncated>"},
        {"role": "assistant", "content": "Now the order.", "reasoning_content": "Need the order.\n", "tool_calls": [CALL2]},
        {"role": "tool", "tool_call_id": "call_2", "content": "{\"status\": \"shipped\"}"},
        {"role": "assistant", "content": "Done: intent: I042", "reasoning_content": "All good."},
        {"role": "user", "content": "Thanks! One more: run it again."},
    ]


CASES = [
    # The reference's OSL / TPOT frame: [user ""] alone, then with an empty assistant.
    {"name": "frame_user", "messages": [{"role": "user", "content": ""}], "add_generation_prompt": False},
    {
        "name": "frame_user_assistant",
        "messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
        "add_generation_prompt": False,
    },
    # A structured assistant output as the reference counts it (MessageInput).
    {
        "name": "output_reasoning_content_tool_calls",
        "messages": [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": "I'll run the tests.", "reasoning_content": "The bug is in io.", "tool_calls": [CALL, CALL2]},
        ],
        "add_generation_prompt": False,
    },
    {
        "name": "output_tool_call_only",
        "messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "", "tool_calls": [CALL]}],
        "add_generation_prompt": False,
    },
    {
        "name": "output_raw_arguments",
        "messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "", "tool_calls": [RAW_CALL]}],
        "add_generation_prompt": False,
    },
    # Full prompts (ISL): tools, salted system prompt, history with reasoning and tool calls.
    {"name": "prompt_with_tools", "messages": conversation(), "tools": TOOLS, "add_generation_prompt": True},
    {
        "name": "prompt_with_tools_preserve_thinking",
        "messages": conversation(),
        "tools": TOOLS,
        "add_generation_prompt": True,
        "kwargs": {"preserve_thinking": True},
    },
    {"name": "prompt_without_tools", "messages": conversation()[:2], "add_generation_prompt": True},
    {
        "name": "prompt_ends_on_tool",
        "messages": conversation()[:4],
        "tools": TOOLS,
        "add_generation_prompt": True,
    },
]


def render(source, case):
    kwargs = dict(SPECIAL)
    kwargs.update(case.get("kwargs") or {})
    try:
        rendered, _ = render_jinja_template(
            conversations=[case["messages"]],
            tools=case.get("tools"),
            chat_template=source,
            add_generation_prompt=case["add_generation_prompt"],
            **kwargs,
        )
        return {"rendered": rendered[0]}
    except Exception as e:  # noqa: BLE001 - recorded, compared as "fails"
        return {"error": f"{type(e).__name__}: {e}"}


def wire(call):
    """A tool call as it travels: `arguments` as a JSON string."""
    args = call["function"]["arguments"]
    if not isinstance(args, str):
        args = json.dumps(args)
    return {**call, "function": {**call["function"], "arguments": args}}


def counts(source):
    """Token counts with the reference's BatchTokenizer on the golden tokenizer + this template."""
    from inference_endpoint.async_utils.services.metrics_aggregator.token_metrics import BatchTokenizer

    tmp = Path(tempfile.mkdtemp())
    try:
        for f in GOLDEN_TOKENIZER.iterdir():
            shutil.copy(f, tmp / f.name)
        cfg = json.loads((tmp / "tokenizer_config.json").read_text())
        cfg["chat_template"] = source
        (tmp / "tokenizer_config.json").write_text(json.dumps(cfg))
        bt = BatchTokenizer(str(tmp), live_workers=1, n_workers=0)
        out = {
            "prefix": bt._prefix_len,
            "baseline": bt._baseline,
            "message": bt._token_count_message(
                "I'll run the tests.", "The bug is in io.", (wire(CALL), wire(CALL2))
            ),
            "message_raw_arguments": bt._token_count_message("", None, (RAW_CALL,)),
            "prompt": bt._token_count_prompt(
                tuple({**m, "tool_calls": [wire(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m
                      for m in conversation()),
                tuple(TOOLS), {"preserve_thinking": True}, None, None,
            ),
        }
        bt.close()
        return out
    finally:
        shutil.rmtree(tmp)


def main():
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = {
        "special_tokens": SPECIAL,
        "cases": CASES,
        # The inputs of the counts below, as the reference's counting code receives them.
        "count_inputs": {
            "message": {"content": "I'll run the tests.", "reasoning": "The bug is in io.", "tool_calls": [wire(CALL), wire(CALL2)]},
            "message_raw_arguments": {"content": "", "reasoning": None, "tool_calls": [RAW_CALL]},
            "prompt": {
                "messages": [{**m, "tool_calls": [wire(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m
                             for m in conversation()],
                "tools": TOOLS,
                "chat_template_kwargs": {"preserve_thinking": True},
            },
        },
        "templates": {},
    }
    for path in sorted(TEMPLATES.glob("*.jinja")):
        source = path.read_text()
        result["templates"][path.name] = {
            "renderings": {c["name"]: render(source, c) for c in CASES},
            "counts": counts(source),
        }
        print(path.name, file=sys.stderr)
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
