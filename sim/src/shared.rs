//! The state every connection of the sim shares: the config, the engine the requests contend
//! for (prefix cache, prefill lanes), the log and the engine's metrics.

use crate::answers::Answers;
use crate::cache::PrefixCache;
use crate::config::SimConfig;
use crate::log::LogStore;
use crate::metrics::EngineMetrics;
use crate::plan;
use parking_lot::Mutex;
use std::sync::atomic::AtomicUsize;
use tokio::time::Instant;

/// State shared by every connection.
pub(crate) struct Shared {
    pub config: SimConfig,
    /// Requests currently decoding (past their first token, not finished).
    pub active_decodes: AtomicUsize,
    engine: Mutex<Engine>,
    pub log: LogStore,
    /// vLLM's series, served on `GET /metrics`.
    pub metrics: EngineMetrics,
    /// The recorded answers of `answer_from`, loaded at start.
    pub answers: Option<Answers>,
    /// Eight hex digits drawn at start and appended to every response id
    /// (`chatcmpl-sim00000007-1f2e3d4c`): like a real server's random ids, unique across
    /// replicas and restarts, so a client's record joins the proxy's by it exactly.
    pub instance: String,
}

/// The parts of the model that requests contend for; locked once per request at admission
/// (and once more at the end to cache the output blocks).
pub(crate) struct Engine {
    pub cache: PrefixCache,
    /// When each prefill lane is next free (only with `timing.prefill_lanes > 0`).
    lanes: Vec<Instant>,
}

impl Shared {
    pub(crate) fn new(
        config: SimConfig,
        keep_log: bool,
        answers: Option<Answers>,
    ) -> std::io::Result<Shared> {
        let cap = if config.cache.enabled {
            config.cache.capacity_tokens
        } else {
            0
        };
        let now = Instant::now();
        Ok(Shared {
            engine: Mutex::new(Engine {
                cache: PrefixCache::new(config.cache.block_tokens, cap),
                lanes: vec![now; config.timing.prefill_lanes as usize],
            }),
            log: LogStore::new(keep_log, config.chunk_log.as_deref())?,
            active_decodes: AtomicUsize::new(0),
            metrics: EngineMetrics::new(config.engine_metrics, &config.model),
            answers,
            config,
            instance: instance_tag(),
        })
    }

    pub(crate) fn engine(&self) -> parking_lot::MutexGuard<'_, Engine> {
        // Engine updates cannot leave it inconsistent in a way that matters to a simulator.
        self.engine.lock()
    }

    pub fn cache_insert(&self, keys: &[u64]) {
        self.engine().cache.insert(keys);
    }

    /// Cache lookup and prefill scheduling. Returns (cached tokens, first-token instant).
    pub(crate) fn admit(&self, plan: &mut plan::Plan, start: Instant) -> Option<Instant> {
        let mut e = self.engine();
        let cached = if self.config.cache.enabled {
            e.cache
                .lookup_and_insert(&plan.prompt_chain, plan.prompt_tokens)
        } else {
            0
        };
        plan.set_cached(&self.config, cached);
        if self.config.timing.is_zero() {
            return None;
        }
        let prefill = plan.prefill;
        let done = match e.lanes.iter_mut().min() {
            Some(lane) => {
                let begin = (*lane).max(start);
                plan.queue = begin - start;
                *lane = begin + prefill;
                *lane
            }
            None => start + prefill,
        };
        Some(done)
    }
}

/// Eight hex digits that differ between servers: std's randomly keyed hasher over the clock
/// and the process id.
fn instance_tag() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:08x}", h.finish() as u32)
}
