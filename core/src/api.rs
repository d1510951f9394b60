//! Which API a request speaks — one enum for every crate (the proxy's routes, the sim's
//! endpoints, capture's conversion, the event readers), named by its path, which is also the
//! `route` metric label.

crate::vocabulary! {
    /// Which API a request speaks, by its path.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum Api {
        /// OpenAI chat completions (`choices[].delta`)
        #[default]
        Chat = "/v1/chat/completions",
        /// OpenAI text completions (`choices[].text`)
        Completions = "/v1/completions",
        /// the OpenAI Responses API (`POST`; not `GET …/v1/responses/{id}`)
        Responses = "/v1/responses",
        /// the Anthropic Messages API (`POST`; not `…/v1/messages/count_tokens`)
        Messages = "/v1/messages",
    }
}

impl Api {
    /// The API of a request path that ends with one of the APIs' paths (a proxy may sit under
    /// a path prefix).
    pub fn of_path(path: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|a| path.ends_with(a.as_str()))
    }

    /// The API streams events of its own (`response.*`, `message_*`) rather than chat chunks.
    pub fn has_own_events(self) -> bool {
        matches!(self, Api::Responses | Api::Messages)
    }

    /// Responses and chunks are chat chunks (`choices[]`): chat and text completions.
    pub fn is_chat_form(self) -> bool {
        matches!(self, Api::Chat | Api::Completions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(Api::of_path("/v1/chat/completions"), Some(Api::Chat));
        assert_eq!(Api::of_path("/v1/completions"), Some(Api::Completions));
        assert_eq!(Api::of_path("/prefix/v1/responses"), Some(Api::Responses));
        assert_eq!(Api::of_path("/v1/responses/resp_1"), None);
        assert_eq!(Api::of_path("/v1/messages"), Some(Api::Messages));
        assert_eq!(Api::of_path("/v1/messages/count_tokens"), None);
        assert_eq!(Api::parse("/v1/messages"), Some(Api::Messages));
    }
}
