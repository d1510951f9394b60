//! Which measured route a request path is.

use tokentap_core::events::Api;

/// The routes the proxy measures; everything else is forwarded and recorded with status and
/// E2E only. Also the `route` metric label (bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Chat,
    Completions,
    /// The OpenAI Responses API (`POST …/v1/responses`; not `GET …/v1/responses/{id}`).
    Responses,
    /// The Anthropic Messages API (`POST …/v1/messages`; not `…/v1/messages/count_tokens`).
    Messages,
    Other,
}

impl Route {
    pub fn of(path: &str) -> Route {
        if path.ends_with("/v1/chat/completions") {
            Route::Chat
        } else if path.ends_with("/v1/completions") {
            Route::Completions
        } else if path.ends_with("/v1/responses") {
            Route::Responses
        } else if path.ends_with("/v1/messages") {
            Route::Messages
        } else {
            Route::Other
        }
    }

    pub fn is_llm(self) -> bool {
        self != Route::Other
    }

    /// The API whose events the response speaks; `input_total` is `--messages-input-tokens
    /// total`.
    pub fn api(self, input_total: bool) -> Api {
        match self {
            Route::Responses => Api::Responses,
            Route::Messages => Api::Messages { input_total },
            _ => Api::Chat,
        }
    }

    /// The route reads a session from the request body when no session header names one.
    pub fn has_body_session(self) -> bool {
        matches!(self, Route::Responses | Route::Messages)
    }

    pub fn label(self) -> &'static str {
        match self {
            Route::Chat => "/v1/chat/completions",
            Route::Completions => "/v1/completions",
            Route::Responses => "/v1/responses",
            Route::Messages => "/v1/messages",
            Route::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::of("/v1/chat/completions"), Route::Chat);
        assert_eq!(Route::of("/prefix/v1/responses"), Route::Responses);
        assert_eq!(Route::of("/v1/responses/resp_1"), Route::Other);
        assert_eq!(Route::of("/v1/messages"), Route::Messages);
        assert_eq!(Route::of("/v1/messages/count_tokens"), Route::Other);
    }
}
