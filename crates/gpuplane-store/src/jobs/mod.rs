//! Jobs: their rows, their parts on nodes, their generations (plans), the assignments agents fetch, the steps
//! they measure, and the custom templates they run; how measured steps retune them.

pub mod agents;
pub mod lifecycle;
pub mod logs;
pub mod lookups;
pub mod recovery;
pub mod replicas;
pub mod steps;
pub mod templates;
pub mod types;

pub use agents::*;
pub use lifecycle::*;
pub use lookups::*;
pub use templates::*;
pub use types::*;
