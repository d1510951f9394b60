//! Which measured route a request path is: one of the APIs (`tokentap_core::api::Api`), or
//! another path.

use tokentap_core::api::Api;
use tokentap_core::events::Dialect;

/// The routes the proxy measures — the APIs; everything else is forwarded and recorded with
/// status and E2E only. Also the `route` metric label (bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// One of the measured APIs.
    Api(Api),
    /// Any other path.
    Other,
}

impl Route {
    /// The route of a request path.
    pub fn of(path: &str) -> Route {
        Api::of_path(path).map_or(Route::Other, Route::Api)
    }

    /// A measured API (its response is parsed).
    pub fn is_llm(self) -> bool {
        self != Route::Other
    }

    /// The API, if the route is one.
    pub fn api(self) -> Option<Api> {
        match self {
            Route::Api(a) => Some(a),
            Route::Other => None,
        }
    }

    /// How its response is read; `messages_input_total` is `--messages-input-tokens total`.
    pub fn dialect(self, messages_input_total: bool) -> Dialect {
        Dialect {
            api: self.api().unwrap_or_default(),
            messages_input_total,
        }
    }

    /// The route reads a session from the request body when no session header names one.
    pub fn has_body_session(self) -> bool {
        self.api().is_some_and(Api::has_own_events)
    }

    /// The `route` metric label: the API's path, or `other`.
    pub fn label(self) -> &'static str {
        match self {
            Route::Api(a) => a.as_str(),
            Route::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::of("/v1/chat/completions"), Route::Api(Api::Chat));
        assert_eq!(
            Route::of("/prefix/v1/responses"),
            Route::Api(Api::Responses)
        );
        assert_eq!(Route::of("/v1/responses/resp_1"), Route::Other);
        assert_eq!(Route::of("/v1/messages"), Route::Api(Api::Messages));
        assert_eq!(Route::of("/v1/messages/count_tokens"), Route::Other);
        assert_eq!(Route::Api(Api::Completions).label(), "/v1/completions");
    }
}
