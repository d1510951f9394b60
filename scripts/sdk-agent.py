"""An agent of each API, written with the vendors' own SDKs (openai, anthropic), for
tests/third_party.rs: it talks to BASE (the proxy) and prints one JSON line of what the SDKs
parsed, so the test can hold the proxy's records against it.

    sdk-agent.py BASE

- Responses API (openai): a streamed turn through the SDK's accumulating helper
  (`responses.stream` + `get_final_response`, which raises on an item never finished), a
  non-streamed one chained by `previous_response_id`, and a streamed tool turn (a required call to
  the offered function, its arguments parsed), no session header.
- Messages API (anthropic): a streamed turn through `messages.stream` (the SDK assembles the
  message; it raises on an event it cannot read), a tool turn answered with a tool_result, and a
  non-streamed turn, then two turns asking for thinking (shown, then `display: omitted`); the
  session travels in `metadata.user_id` as Claude Code writes it.
Both send an API key (the test checks it reaches no record).
"""
import json
import sys

import anthropic
import openai

base = sys.argv[1].rstrip("/")
out = {"responses": [], "messages": []}

oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-SECRET-openai", max_retries=0)
# The SDK's accumulating helper: it raises on an event it cannot place (a delta before its item,
# an item never finished) and builds the final response from the events alone.
text = ""
# (Room to finish: the helper raises on `response.incomplete`, as the API sends at the cap.)
with oa.responses.stream(model="tokentap-sim", instructions="Be brief.", input="hello",
                         max_output_tokens=400) as stream:
    for ev in stream:
        if ev.type == "response.output_text.delta":
            text += ev.delta
    final = stream.get_final_response()
rid, usage = final.id, final.usage
out["responses"].append({"id": rid, "text": text, "final_text": final.output_text,
                         "items": [o.type for o in final.output],
                         "input_tokens": usage.input_tokens,
                         "output_tokens": usage.output_tokens, "stream": True})
r2 = oa.responses.create(model="tokentap-sim", previous_response_id=rid,
                         input=[{"role": "user", "content": "and again"}], max_output_tokens=12)
out["responses"].append({"id": r2.id, "text": r2.output_text, "final_text": r2.output_text,
                         "items": [o.type for o in r2.output],
                         "input_tokens": r2.usage.input_tokens,
                         "output_tokens": r2.usage.output_tokens, "stream": False})
# A tool turn through the helper: the call is to the offered function, its arguments parse.
fn_tools = [{"type": "function", "name": "shell", "description": "run a command",
             "parameters": {"type": "object", "properties": {"command": {"type": "array",
                            "items": {"type": "string"}}}, "required": ["command"]}}]
with oa.responses.stream(model="tokentap-sim", input="list the files", tools=fn_tools,
                         tool_choice="required", max_output_tokens=400,
                         previous_response_id=r2.id) as stream:
    for ev in stream:
        pass
    f3 = stream.get_final_response()
calls = [o for o in f3.output if o.type == "function_call"]
out["responses"].append({"id": f3.id, "text": f3.output_text, "final_text": f3.output_text,
                         "items": [o.type for o in f3.output],
                         "calls": [[c.name, json.loads(c.arguments)] for c in calls],
                         "input_tokens": f3.usage.input_tokens,
                         "output_tokens": f3.usage.output_tokens, "stream": True})

an = anthropic.Anthropic(base_url=base, api_key="sk-ant-SECRET-key", max_retries=0)
session = "6f1c9d2e-0000-4000-8000-00000000c0de"
meta = {"user_id": f"user_ab12cd_account_9b1c_session_{session}"}
tools = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
first = [{"role": "user", "content": "list the files"}]
with an.messages.stream(model="tokentap-sim", max_tokens=24, system="You are a shell agent.",
                        messages=first, tools=tools, metadata=meta) as s:
    m1 = s.get_final_message()
def summary(m, stream):
    return {"id": m.id, "stop_reason": m.stop_reason, "input_tokens": m.usage.input_tokens,
            "output_tokens": m.usage.output_tokens, "blocks": [b.type for b in m.content],
            "stream": stream}
out["messages"].append(summary(m1, True))
history = first + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m1.content]}]
calls = [b for b in m1.content if b.type == "tool_use"]
if calls:
    history.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": c.id, "content": "a.txt"} for c in calls]})
else:
    history.append({"role": "user", "content": "go on"})
with an.messages.stream(model="tokentap-sim", max_tokens=24, system="You are a shell agent.",
                        messages=history, tools=tools, metadata=meta) as s:
    m2 = s.get_final_message()
out["messages"].append(summary(m2, True))
m3 = an.messages.create(model="tokentap-sim", max_tokens=8, system="You are a shell agent.",
                        messages=[{"role": "user", "content": "one more"}], metadata=meta)
out["messages"].append(summary(m3, False))
# Thinking asked for: each thinking block ends with its signature; shown, then omitted.
for display in ("summarized", "omitted"):
    thinking = {"type": "enabled", "budget_tokens": 1024, "display": display}
    with an.messages.stream(model="tokentap-sim", max_tokens=40, system="You are a shell agent.",
                            messages=[{"role": "user", "content": "think first"}],
                            metadata=meta, extra_body={"thinking": thinking}) as s:
        m = s.get_final_message()
    row = summary(m, True)
    row["thinking"] = [{"text": b.thinking, "signature": b.signature}
                       for b in m.content if b.type == "thinking"]
    row["display"] = display
    out["messages"].append(row)
out["versions"] = {"openai": openai.__version__, "anthropic": anthropic.__version__}
print(json.dumps(out))
