//! The sim ← proxy ← replay topology on `127.0.0.1:0`, and its parts.
//!
//! ```text
//!  replay (RunOpts from Stack::replay_config) ──► proxy ──► sim
//! ```

use std::path::Path;
use std::time::Duration;
use tokentap_proxy::{Config, Proxy, ShutdownReport};
use tokentap_replay::RunOpts;
use tokentap_sim::{SimConfig, SimServer};

/// The zero-delay sim, every response as long as its max tokens.
pub fn sim_cfg() -> SimConfig {
    let mut c = SimConfig::zero_delay();
    c.output.always_max = true;
    c
}

/// A sim started on `127.0.0.1:0`.
pub async fn sim(cfg: SimConfig) -> SimServer {
    SimServer::start(cfg).await.expect("sim starts")
}

/// A proxy config in front of `upstreams`, keeping its records in memory.
pub fn proxy_cfg(upstreams: &[String]) -> Config {
    let mut c = Config::new(upstreams.iter().cloned());
    c.keep_records = true;
    c
}

/// A proxy started on `127.0.0.1:0` (client and admin listeners).
pub async fn proxy(cfg: Config) -> Proxy {
    Proxy::start(cfg).await.expect("proxy starts")
}

/// A sim with a proxy in front of it; a replay (or any client) aims at [`Stack::endpoint`].
pub struct Stack {
    /// The sim.
    pub sim: SimServer,
    /// The proxy in front of it.
    pub proxy: Proxy,
}

impl Stack {
    /// The sim with a proxy in front ([`proxy_cfg`], then `tune`).
    pub async fn proxied(cfg: SimConfig, tune: impl FnOnce(&mut Config)) -> Stack {
        let sim = sim(cfg).await;
        let mut pc = proxy_cfg(&[sim.base_url()]);
        tune(&mut pc);
        Stack {
            proxy: proxy(pc).await,
            sim,
        }
    }

    /// Where a client sends: the proxy.
    pub fn endpoint(&self) -> String {
        self.proxy.base_url()
    }

    /// A replay aimed at [`Stack::endpoint`], model `m`, writing into `out` when given.
    pub fn replay_config(&self, out: Option<&Path>) -> RunOpts {
        let mut c = RunOpts::new(&self.endpoint()).expect("a valid endpoint");
        c.model = Some("m".into());
        c.out = out.map(Path::to_path_buf);
        c
    }

    /// Stops the proxy (draining within `grace`; its report), then the sim.
    pub async fn shutdown(self, grace: Duration) -> ShutdownReport {
        let report = self.proxy.shutdown(grace).await;
        self.sim.shutdown().await;
        report
    }
}
