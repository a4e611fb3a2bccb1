//! Tenant volumes: storage that outlives a lease (docs/volumes.md).
//!
//! A volume is one ext4 image in one pool, made, grown, mounted and destroyed by the agent of the node chosen
//! for it ([`agents`]; the images themselves: `gpuplane_agent::volumes`). Its size is its quota, since the image
//! is all the space it has; a store is never promised more than it has free ([`rules::place`]), so a full
//! volume fills only itself. Tenants create, list, grow and delete their own ([`routes`]); operators choose
//! what each pool sells (kinds, capacity, a storage price over time) and each tenant's quotas.

pub mod agents;
pub mod attachments;
pub mod idle;
pub mod metering;
pub mod routes;
pub mod rules;
