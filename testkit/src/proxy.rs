//! What the proxy's tests import (`use tokentap_testkit::proxy::*;`).

pub use crate::client::{client, client_h2, send, Got, TestClient};
pub use crate::requests::{chat, mask_created, post, post_chat};
pub use crate::topology::{proxy, proxy_cfg, sim, sim_cfg, Stack};
pub use crate::upstreams::{closing_upstream, dead_addr, silent_upstream, split_upstream};
pub use crate::within;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use tokentap_proxy::Proxy;

/// GET on the admin listener: the status and the body as text.
pub async fn admin_get(p: &Proxy, path: &str) -> (StatusCode, String) {
    let c = client();
    let req = Request::get(format!("http://{}{}", p.admin_addr(), path))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let g = send(&c, req).await;
    (g.status, g.text())
}
