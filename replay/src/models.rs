//! Without `--model`: the model is the one the endpoints serve, read from `GET /v1/models`
//! (OpenAI's list: `{"data": [{"id": …}, …]}`) — an error naming the choices when an endpoint
//! serves several, or when the endpoints disagree.

use crate::client::{EndpointTarget, Target};
use crate::config::RunConfig;
use crate::error::ReplayError;
use std::time::Duration;

/// How long one `/v1/models` exchange may take (connect and TLS included).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest models list read.
const MAX_BODY: usize = 4 << 20;

/// Sets `config.model` from the endpoints' `/v1/models` when the dataset needs a run-level model
/// and none was given. Does nothing otherwise.
pub async fn discover(
    config: &mut RunConfig,
    ds: &tokentap_dataset::Dataset,
) -> Result<(), ReplayError> {
    let Some((conv, line)) = config.row_without_model(ds) else {
        return Ok(());
    };
    let target = Target::resolve(
        &config.endpoints,
        &config.routing_headers,
        config.api_key.as_ref().map(|k| k.expose()),
        &config.trust(),
        // A plain GET: HTTP/1.1 whatever the run speaks.
        crate::config::Protocols::Http1,
    )
    .await?;
    let why_needed = format!(
        "{}:{line}: conversation {conv:?} has a client row without its own \"model\"",
        ds.path.display()
    );
    let getter = crate::get::Getter::new(&config.trust()).map_err(ReplayError::Config)?;
    let mut lists: Vec<(String, Vec<String>)> = Vec::new();
    for ep in &target.endpoints {
        let url = models_url(ep);
        let ids = list(&getter, &url, target.authorization.as_ref())
            .await
            .map_err(|e| {
                ReplayError::Config(format!(
                    "no model name: pass --model NAME ({why_needed}); asking {url} which model it serves failed: {e}"
                ))
            })?;
        lists.push((url, ids));
    }
    let model = one_model(&lists).map_err(|e| {
        ReplayError::Config(format!(
            "no model name: pass --model NAME ({why_needed}); {e}"
        ))
    })?;
    tracing::info!(model = %model, "model read from /v1/models");
    config.model = Some(model);
    config.model_discovered = true;
    Ok(())
}

/// The one model every endpoint lists, or why there is none.
pub fn one_model(lists: &[(String, Vec<String>)]) -> Result<String, String> {
    let mut chosen: Option<(&str, &str)> = None;
    for (url, ids) in lists {
        match ids.as_slice() {
            [] => return Err(format!("{url} lists no model")),
            [one] => match chosen {
                None => chosen = Some((url, one)),
                Some((u0, m0)) if m0 != one => {
                    return Err(format!(
                        "the endpoints disagree: {u0} serves {m0:?}, {url} serves {one:?}"
                    ))
                }
                Some(_) => {}
            },
            several => {
                return Err(format!(
                    "{url} serves several models: {}",
                    several
                        .iter()
                        .map(|m| format!("{m:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
    }
    chosen
        .map(|(_, m)| m.to_string())
        .ok_or_else(|| "no endpoint".to_string())
}

/// `/v1/models` beside the endpoint's chat path.
fn models_url(ep: &EndpointTarget) -> String {
    let path = models_path(ep.path.path());
    let base = ep.url.strip_suffix(ep.path.path()).unwrap_or(&ep.url);
    format!("{base}{path}")
}

fn models_path(chat: &str) -> String {
    let prefix = chat.strip_suffix("/chat/completions").unwrap_or("/v1");
    format!("{prefix}/models")
}

/// `GET /v1/models` of one endpoint (crate::get: hyper-util's client, the run's trust).
async fn list(
    getter: &crate::get::Getter,
    url: &str,
    authorization: Option<&http::HeaderValue>,
) -> Result<Vec<String>, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let mut headers = vec![(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    )];
    if let Some(a) = authorization {
        headers.push((http::header::AUTHORIZATION, a.clone()));
    }
    let answer = getter.get(&uri, &headers, MAX_BODY, TIMEOUT).await?;
    if !answer.status.is_success() {
        let body = &answer.body[..answer.body.len().min(300)];
        return Err(format!(
            "HTTP {}: {}",
            answer.status.as_u16(),
            String::from_utf8_lossy(body).trim()
        ));
    }
    parse_list(&answer.body)
}

/// The `id`s of an OpenAI models list.
pub fn parse_list(body: &[u8]) -> Result<Vec<String>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("expected a JSON models list: {e}"))?;
    let data = v["data"]
        .as_array()
        .ok_or("expected a JSON object with a \"data\" list of models")?;
    Ok(data
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_choices() {
        assert_eq!(models_path("/v1/chat/completions"), "/v1/models");
        assert_eq!(models_path("/x/v1/chat/completions"), "/x/v1/models");
        let l =
            |u: &str, ids: &[&str]| (u.to_string(), ids.iter().map(|s| s.to_string()).collect());
        assert_eq!(one_model(&[l("a", &["m"]), l("b", &["m"])]).unwrap(), "m");
        let e = one_model(&[l("a", &["m"]), l("b", &["n"])]).unwrap_err();
        assert!(
            e.contains("disagree") && e.contains("\"m\"") && e.contains("\"n\""),
            "{e}"
        );
        let e = one_model(&[l("a", &["m", "n"])]).unwrap_err();
        assert!(e.contains("several models: \"m\", \"n\""), "{e}");
        assert!(one_model(&[l("a", &[])])
            .unwrap_err()
            .contains("lists no model"));
        assert_eq!(
            parse_list(br#"{"object":"list","data":[{"id":"a","object":"model"},{"id":"b"}]}"#)
                .unwrap(),
            vec!["a", "b"]
        );
        assert!(parse_list(b"[]").is_err());
    }
}
