//! End-to-end topologies across crates: replay → proxy → sim on 127.0.0.1:0, all real sockets.

use std::sync::Arc;
use std::time::Duration;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_dataset::Dataset;
use tokentap_replay::{ProgressMode, RunOpts};
use tokentap_sim::SimConfig;
use tokentap_testkit::data::synth_dataset;
use tokentap_testkit::topology::Stack;

fn coding_dataset(n: usize) -> Arc<Dataset> {
    synth_dataset(n, 0, 0.1)
}

/// Replays `ds` through a fresh proxy in front of a fresh sim; returns the proxy's records.
async fn through_proxy(
    ds: Arc<Dataset>,
    sim_cfg: SimConfig,
    tune: impl FnOnce(&mut RunOpts),
) -> Vec<TurnRecord> {
    let stack = Stack::proxied(sim_cfg, |_| {}).await;
    let mut rc = stack.replay_config(None);
    tune(&mut rc);
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let client_turns = out.summary.counts.total as usize;
    let recs = stack.proxy.wait_records(client_turns).await;
    let report = stack.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        report.seen, report.written,
        "every request the proxy saw has a record"
    );
    assert_eq!(recs.len(), client_turns, "one proxy record per client turn");
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    recs
}

/// docs/benchmark.md#cache-clearing: generated-token cache clearing must be visible in the
/// cached-token counts the proxy reports. The sim opens its generated reasoning with the same
/// preamble as the synthesized recorded reasoning, like a real model does: without clearing, the
/// next turn reuses the KV blocks of that preamble; with a leading space inserted, it cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_token_cache_clearing_shows_in_the_proxys_cached_tokens() {
    let ds = coding_dataset(4);
    let sim_cfg = || {
        let mut c = SimConfig::zero_delay();
        c.modes.reasoning_fraction = 1.0;
        c.output.always_max = true;
        c
    };
    let base = |c: &mut RunOpts| {
        c.salt = true;
        c.include_usage = true;
        c.sampling.max_completion_tokens = Some(96);
    };
    let kept = through_proxy(ds.clone(), sim_cfg(), base).await;
    let cleared = through_proxy(ds, sim_cfg(), |c| {
        base(c);
        c.clear_generated = true;
    })
    .await;
    let key = |r: &TurnRecord| (r.conversation_id.clone(), r.turn_index);
    let mut kept: Vec<_> = kept
        .iter()
        .map(|r| (key(r), r.measured.cached_tokens.unwrap()))
        .collect();
    let mut cleared: Vec<_> = cleared
        .iter()
        .map(|r| (key(r), r.measured.cached_tokens.unwrap()))
        .collect();
    kept.sort();
    cleared.sort();
    assert_eq!(kept.len(), cleared.len());
    let mut later_turns = 0;
    for ((k, with_reuse), (k2, without)) in kept.iter().zip(&cleared) {
        assert_eq!(k, k2);
        if k.1 == 0 {
            assert_eq!(
                with_reuse, without,
                "first turns have no generated history: {k:?}"
            );
            continue;
        }
        later_turns += 1;
        // The preamble is ~240 bytes = 60 stand-in tokens: at least two whole 16-token blocks.
        assert!(
            *with_reuse >= without + 32,
            "turn {k:?}: {with_reuse} cached without clearing vs {without} with clearing"
        );
    }
    assert!(later_turns >= 8, "only {later_turns} later turns compared");
}
