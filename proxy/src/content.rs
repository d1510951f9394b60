//! `--record-content`: the prompt and the output text, put into the record only when the
//! operator asks. Built once at the end of the request from refcounted clones of the frames (the
//! data path only clones `Bytes` while this is on).

use bytes::Bytes;
use serde_json::{json, Value};
use tokentap_core::sse::Framer;

/// `{"request": <request JSON>, "output": "...", "reasoning": "..."}`; a non-streaming body is
/// kept whole under `"response"`.
pub fn build(request: Option<&Bytes>, response: &[Bytes]) -> Value {
    let req = request
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .unwrap_or(Value::Null);
    let body = concat_frames(response);
    let mut output = String::new();
    let mut reasoning = String::new();
    let mut events = 0;
    let take = |data: &[u8]| {
        events += 1;
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(choices) = v.get("choices").and_then(Value::as_array) {
            for c in choices {
                let d = c.get("delta").unwrap_or(&Value::Null);
                if let Some(t) = d.get("content").and_then(Value::as_str) {
                    output.push_str(t);
                }
                if let Some(t) = c.get("text").and_then(Value::as_str) {
                    output.push_str(t);
                }
                for k in ["reasoning_content", "reasoning"] {
                    if let Some(t) = d.get(k).and_then(Value::as_str) {
                        reasoning.push_str(t);
                    }
                }
            }
        }
    };
    Framer::each_data(&body, take);
    if events == 0 {
        let resp = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
        return json!({"request": req, "response": resp});
    }
    json!({"request": req, "output": output, "reasoning": reasoning})
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
