"""A chat-completions agent written with the OpenAI SDK (the way litellm-based agents talk), for
tests/third_party.rs: it talks to BASE (the proxy) and prints one JSON line of what it did.

    sdk-chat-agent.py BASE SESSION

A tool loop through the SDK's accumulating stream helper (`chat.completions.stream` +
`get_final_completion`): the prompt, the model's call of the offered `shell` tool, its result, the
answer, then a follow-up question. Every request carries the parameters such agents set —
`max_tokens`, `temperature`, `tool_choice`, `stream_options` — and the assistant message of a tool
call goes back with `"content": ""`, as litellm writes it. The session travels in `X-Session-ID`;
an API key is sent (the test checks it reaches no record).
"""
import json
import subprocess
import sys

import openai

base, session = sys.argv[1].rstrip("/"), sys.argv[2]
oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-SECRET-chat", max_retries=0)
tools = [{"type": "function", "function": {
    "name": "shell", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}]
messages = [{"role": "system", "content": "You are a shell agent. Use the shell tool."},
            {"role": "user", "content": "How many files are in /etc? Use the tool."}]
out = {"turns": 0, "tools_run": 0, "answers": []}


def turn():
    with oa.chat.completions.stream(model="tokentap-sim", messages=messages, tools=tools,
                                    tool_choice="auto", max_tokens=300, temperature=0.5,
                                    stream_options={"include_usage": True},
                                    extra_headers={"X-Session-ID": session}) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    out["turns"] += 1
    return final.choices[0].message


for _ in range(4):
    msg = turn()
    if msg.tool_calls:
        messages.append({"role": "assistant", "content": msg.content or "",
                         "tool_calls": [{"id": c.id, "type": "function",
                                         "function": {"name": c.function.name,
                                                      "arguments": c.function.arguments}}
                                        for c in msg.tool_calls]})
        for c in msg.tool_calls:
            json.loads(c.function.arguments)
            result = subprocess.run(["ls", "/etc"], capture_output=True, text=True).stdout
            out["tools_run"] += 1
            messages.append({"role": "tool", "tool_call_id": c.id,
                             "content": f"{len(result.split())} files"})
        continue
    out["answers"].append(msg.content)
    messages.append({"role": "assistant", "content": msg.content})
    if len(out["answers"]) == 2:
        break
    messages.append({"role": "user", "content": "And which of them is the largest? Just guess."})
print(json.dumps(out))
