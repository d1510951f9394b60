//! Which measured route a request path is.

/// The routes the proxy measures; everything else is forwarded and recorded with status and
/// E2E only. Also the `route` metric label (bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Chat,
    Completions,
    Other,
}

impl Route {
    pub fn of(path: &str) -> Route {
        if path.ends_with("/v1/chat/completions") {
            Route::Chat
        } else if path.ends_with("/v1/completions") {
            Route::Completions
        } else {
            Route::Other
        }
    }

    pub fn is_llm(self) -> bool {
        self != Route::Other
    }

    pub fn label(self) -> &'static str {
        match self {
            Route::Chat => "/v1/chat/completions",
            Route::Completions => "/v1/completions",
            Route::Other => "other",
        }
    }
}
