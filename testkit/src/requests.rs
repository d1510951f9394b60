//! Chat request bodies and the requests that carry them.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;

/// A chat completion body for the sim's model: a system and a user message, `max_tokens`,
/// `stream`, and every field of `extra` on top.
pub fn chat(stream: bool, max_tokens: u64, extra: serde_json::Value) -> Bytes {
    let mut v = serde_json::json!({
        "model": "tokentap-sim",
        "messages": [
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "Say something, please, at length."}
        ],
        "max_completion_tokens": max_tokens,
        "stream": stream,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

/// A JSON POST to an absolute URL, as an SSE client sends it (with a bearer key, which must
/// never reach a record or a log), with the session header when given.
pub fn post(url: &str, body: Bytes, session: Option<&str>) -> Request<Full<Bytes>> {
    let mut b = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("authorization", "Bearer secret-key");
    if let Some(s) = session {
        b = b.header("x-session-id", s);
    }
    b.body(Full::new(body)).unwrap()
}

/// [`post`] to `/v1/chat/completions` under a base URL.
pub fn post_chat(base: &str, body: Bytes, session: Option<&str>) -> Request<Full<Bytes>> {
    post(&format!("{base}/v1/chat/completions"), body, session)
}

/// Replaces the value of every `"created":N` and the sim's instance tag in its response ids so
/// two sims' bodies can be compared byte for byte (`created` is the wall-clock second and the
/// tag is drawn at start: the two things a second sim cannot reproduce).
pub fn mask_created(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = mask_number(&s, "\"created\":");
    // The Responses API's spelling.
    let s = mask_number(&s, "\"created_at\":");
    mask_sim_instance(&s)
}

fn mask_number(s: &str, key: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(key) {
        let (a, b) = rest.split_at(i + key.len());
        out.push_str(a);
        let end = b.find(|c: char| !c.is_ascii_digit()).unwrap_or(b.len());
        out.push('N');
        rest = &b[end..];
    }
    out.push_str(rest);
    out
}

/// The sim's response ids end in its instance tag (`chatcmpl-sim00000007-1f2e3d4c`), drawn at
/// start so that two servers never share an id: masked to `-T`, so two sims' bodies compare.
fn mask_sim_instance(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    // `chatcmpl-sim…`, `resp_sim…`, `msg_sim…`.
    while let Some(i) = rest.find("sim") {
        let (a, b) = rest.split_at(i + 3);
        out.push_str(a);
        let bytes = b.as_bytes();
        let tagged = bytes.len() >= 17
            && bytes[..8].iter().all(u8::is_ascii_digit)
            && bytes[8] == b'-'
            && bytes[9..17].iter().all(u8::is_ascii_hexdigit);
        if tagged {
            out.push_str(&b[..9]);
            out.push('T');
            rest = &b[17..];
        } else {
            rest = b;
        }
    }
    out.push_str(rest);
    out
}
