//! Operators' reads that span domains: health, metrics gauges, the CLI's and the planner API's inventory reads.
