//! The replay's options: [`RunConfig`] (in `tokentap_run::config`, where every option is
//! declared once and `config.json` is its serde form) with the command's one `--concurrency`,
//! and the embedded parsing the sweep and the tests share.

pub use tokentap_run::config::*;

use crate::error::ReplayError;

/// `tokentap replay`: the run's configuration and its one concurrency.
#[derive(clap::Args, Clone, Debug)]
#[group(id = "ReplayOpts")]
pub struct Opts {
    #[command(flatten)]
    pub config: RunConfig,
    /// Target concurrency: number of active conversations (closed loop).
    /// `tokentap sweep --concurrency` takes a list (`1,4,16,64`): one measurement point each.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_CONCURRENCY",
        default_value_t = 1,
        value_parser = parse_concurrency,
        value_name = "N",
        help_heading = "Load"
    )]
    pub concurrency: usize,
}

/// `--concurrency` of one run: a whole number ≥ 1 (a list is a sweep's).
fn parse_concurrency(s: &str) -> Result<usize, String> {
    if s.contains(',') {
        return Err(format!(
            "a list of concurrencies is a sweep (`tokentap sweep --concurrency {s}`)"
        ));
    }
    tokentap_core::value::positive(s)
}

/// Parses a subcommand's options (`A`, a `clap::Args`) from an argument list without a program
/// name, as `tokentap NAME` would: for tests and embedding (the sweep's, the demo's).
pub fn parse_args<A, I, T>(name: &'static str, args: I) -> Result<A, clap::Error>
where
    A: clap::Args + clap::FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cmd = A::augment_args(clap::Command::new(name));
    let argv =
        std::iter::once(std::ffi::OsString::from(name)).chain(args.into_iter().map(Into::into));
    A::from_arg_matches(&cmd.try_get_matches_from(argv)?)
}

impl Opts {
    /// Parses options from an argument list (without a program name), as `tokentap replay`
    /// would. For tests and embedding.
    pub fn try_parse_from_args<I, T>(args: I) -> Result<Opts, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        parse_args("replay", args)
    }
}

impl Opts {
    /// The run's configuration: the options at their concurrency, resolved.
    pub fn resolve(&self) -> Result<RunConfig, ReplayError> {
        Ok(self.config.at(self.concurrency)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["--endpoint", "http://127.0.0.1:9", "--dataset", "x.jsonl"];
        v.extend_from_slice(args);
        Opts::try_parse_from_args(v).unwrap()
    }

    #[test]
    fn qwen_preset_with_override() {
        let c = opts(&["--preset", "qwen", "--top-k", "40"])
            .resolve()
            .unwrap();
        assert_eq!(c.sampling.top_k, Some(40));
        assert_eq!(c.sampling.top_p, Some(0.95));
        assert_eq!(c.sampling.presence_penalty, Some(1.5));
        assert_eq!(c.sampling.max_completion_tokens, Some(8192));
        assert_eq!(
            c.sampling.chat_template_kwargs,
            Some(serde_json::json!({"preserve_thinking": true}))
        );
        assert_eq!(c.turn_timeout(), Duration::from_secs(14_400));
    }

    #[test]
    fn no_preset_sends_only_what_is_given() {
        let c = opts(&["--max-tokens", "7"]).resolve().unwrap();
        assert_eq!(
            c.sampling,
            Sampling {
                max_completion_tokens: Some(7),
                ..Sampling::default()
            }
        );
        assert_eq!(c.routing_headers, ["X-Session-ID"]);
    }

    #[test]
    fn routing_headers_replace_default() {
        let o = opts(&[
            "--routing-header",
            "X-Session-ID",
            "--routing-header",
            "X-SMG-Routing-Key",
        ]);
        assert_eq!(
            o.config.routing_headers,
            ["X-Session-ID", "X-SMG-Routing-Key"]
        );
    }

    #[test]
    fn api_key_is_never_serialized() {
        let o = opts(&["--api-key", "sk-supersecret"]);
        let c = o.resolve().unwrap();
        let b = serde_json::to_string(&c).unwrap();
        let d = format!("{o:?}{c:?}");
        for s in [b, d] {
            assert!(!s.contains("supersecret"), "{s}");
        }
        assert!(c.api_key_set);
    }

    /// `new` takes every default from the flags' declarations, and resolves as the CLI does.
    #[test]
    fn new_is_the_command_line_without_flags() {
        let a = RunConfig::new("http://127.0.0.1:9").unwrap();
        let b = opts(&[]).resolve().unwrap();
        let (a, b) = (
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a["delay_scale"], DEFAULT_DELAY_SCALE);
        assert_eq!(a["max_event_bytes"], DEFAULT_MAX_EVENT_BYTES);
        assert_eq!(a["turn_timeout_s"], 86_400.0);
        assert_eq!(a["kernel_rx_timestamps"], true);
        assert_eq!(a["byte_compatible"], true);
        assert_eq!(a["shard"], serde_json::json!({"index": 0, "count": 1}));
        assert_eq!(a["concurrency"], 1);
    }

    /// `config.json` reads back into the same configuration, the HTTP version's two keys and
    /// the warmup included; resolving again changes nothing.
    #[test]
    fn config_json_round_trips_and_resolution_is_idempotent() {
        let mut c = opts(&[
            "--http2",
            "--preset",
            "qwen",
            "--temperature",
            "0.5",
            "--warmup-trajectories",
            "3",
            "--seed-set",
            "A",
        ])
        .resolve()
        .unwrap();
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            (v["http1"].clone(), v["http2"].clone()),
            (false.into(), true.into())
        );
        assert_eq!(v["warmup"]["trajectories"], 3);
        assert_eq!(v["sampling"]["temperature"], 0.5);
        assert_eq!(v["sampling"]["top_k"], 20);
        assert_eq!(v["seed_set"]["id"], "A");
        let back: RunConfig = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.protocols, Protocols::Http2);
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
        c.resolve().unwrap();
        assert_eq!(serde_json::to_value(&c).unwrap(), v);
    }

    #[test]
    fn one_concurrency_per_run() {
        let e = Opts::try_parse_from_args([
            "--endpoint",
            "http://h",
            "--dataset",
            "x",
            "--concurrency",
            "1,4",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("tokentap sweep --concurrency 1,4"), "{e}");
        let e = Opts::try_parse_from_args([
            "--endpoint",
            "http://h",
            "--dataset",
            "x",
            "--concurrency",
            "0",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains(">= 1"), "{e}");
    }

    #[test]
    fn endpoint_forms() {
        let e = Endpoint::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(e.path, "/v1/chat/completions");
        assert_eq!(e.authority, "127.0.0.1:8000");
        assert_eq!(
            Endpoint::parse("http://h/v1/").unwrap().path,
            "/v1/chat/completions"
        );
        assert_eq!(
            Endpoint::parse("http://h:1/x/v1/chat/completions")
                .unwrap()
                .path,
            "/x/v1/chat/completions"
        );
        assert_eq!(Endpoint::parse("http://h").unwrap().port, 80);
        let tls = Endpoint::parse("https://h").unwrap();
        assert!(tls.https);
        assert_eq!(
            (tls.port, tls.url.as_str()),
            (443, "https://h/v1/chat/completions")
        );
        assert!(Endpoint::parse("ftp://h").is_err());
        assert!(Endpoint::parse("h:80").is_err());
    }

    #[test]
    fn durations_and_shards() {
        assert_eq!(
            tokentap_core::duration::parse("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            tokentap_core::duration::parse("2m").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            tokentap_core::duration::parse("1.5").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(tokentap_core::duration::parse("-1s").is_err());
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
        assert!("4/4".parse::<Shard>().is_err());
    }
}
