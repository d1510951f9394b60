//! One way to print an error for a person: the message and its causes, each said once.

use std::error::Error;

/// `e` and its causes joined by `": "`, skipping a cause whose text the message already holds
/// (an error that formats its source into its own message — most wrappers, ours and std's —
/// would otherwise print it twice, as `{:#}` does).
pub fn report(e: &(dyn Error + 'static)) -> String {
    let mut out = String::new();
    let mut next: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(cause) = next {
        next = cause.source();
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read the dataset /nope.jsonl: {source}")]
    struct Wrapper {
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("starting the replay")]
    struct Outer(#[source] Wrapper);

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = Outer(Wrapper { source: io });
        let r = report(&e);
        assert_eq!(
            r,
            format!(
                "starting the replay: cannot read the dataset /nope.jsonl: {}",
                std::io::Error::from(std::io::ErrorKind::NotFound)
            )
        );
    }

    #[test]
    fn causes_not_in_the_message_are_all_said() {
        let e = Wrapper {
            source: std::io::Error::other("disk on fire"),
        };
        assert_eq!(
            report(&e),
            "cannot read the dataset /nope.jsonl: disk on fire"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("writing summary.json")]
        struct Plain(#[source] std::io::Error);
        let e = Plain(std::io::Error::other("disk on fire"));
        assert_eq!(report(&e), "writing summary.json: disk on fire");
    }
}
