//! What the API tests share: the in-process app (`app`), the server binary (`binary`), real agents and the API
//! over HTTP (`agents`), test hosts in network namespaces (`net`), jobs' processes (`jobs`), the runtime's torch
//! environment (`torch`) and a webhook receiver (`webhooks`).

pub mod agents;
pub mod app;
pub mod binary;
pub mod jobs;
pub mod net;
pub mod torch;
pub mod webhooks;
