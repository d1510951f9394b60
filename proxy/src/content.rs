//! `--record-content`: the prompt and the output text, put into the record only when the
//! operator asks. Built once at the end of the request from refcounted clones of the frames (the
//! data path only clones `Bytes` while this is on).

use bytes::Bytes;
use serde_json::{json, Value};
use tokentap_core::convert::Assembled;
use tokentap_core::events::Api;
use tokentap_core::sse::Framer;

/// `{"request": <request JSON>, "output": "...", "reasoning": "...", "tool_calls": [...]}` —
/// a stream of any API put back together in chat form (`tool_calls` only when there were some);
/// a non-streaming body is kept whole under `"response"`.
pub fn build(api: Api, request: Option<&Bytes>, response: &[Bytes]) -> Value {
    let req = request
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .unwrap_or(Value::Null);
    let body = concat_frames(response);
    let mut out = Assembled::default();
    let mut events = 0;
    Framer::each_data(&body, |data| {
        events += 1;
        out.take(api, data);
    });
    if events == 0 {
        let resp = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
        return json!({"request": req, "response": resp});
    }
    let mut v = json!({"request": req, "output": out.content, "reasoning": out.reasoning});
    let calls = out.tool_calls();
    if !calls.is_empty() {
        v["tool_calls"] = Value::Array(calls);
    }
    v
}

/// The content of a request whose output passed `--max-event-bytes`: the request, and
/// `output_omitted` saying why the output is not there.
pub fn omitted(request: Option<&Bytes>, limit: usize) -> Value {
    let req = request
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .unwrap_or(Value::Null);
    json!({
        "request": req,
        "output_omitted": format!("the output passed --max-event-bytes ({limit} bytes) and was not kept"),
    })
}

/// The frames of a body as one buffer (no copy for a single frame).
pub(crate) fn concat_frames(frames: &[Bytes]) -> Bytes {
    match frames {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut v = Vec::with_capacity(many.iter().map(Bytes::len).sum());
            for f in many {
                v.extend_from_slice(f);
            }
            Bytes::from(v)
        }
    }
}
