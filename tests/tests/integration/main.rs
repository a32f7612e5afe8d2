//! Sluice's integration tests against real services (a Kafka broker and a three-node
//! cluster started by `scripts/test.sh`, Delta tables, compiled components), as one
//! test binary: one link instead of one per file. Tests that need a process of their
//! own (`large_commit.rs` reads its own peak memory, `service_neighbours.rs` compares
//! throughput alone and beside hostile tenants) are binaries of their own beside it.

mod bench_smoke;
mod cdf_golden;
mod check;
mod cluster;
mod cluster_plumbing;
mod cluster_start;
mod console;
mod contract;
mod debezium;
mod delivery;
mod deploy_safety;
mod encodings;
mod error_policy;
mod errors;
mod follow;
mod guide;
mod headers;
mod host_limits;
mod languages;
mod lookups;
mod motivating_case;
mod object_store;
mod registry_outage;
mod release;
mod replay;
mod schema_changes;
mod security;
mod service_cli;
mod service_cluster;
mod service_restart;
mod service_swap;
mod service_tenants;
mod shadow;
mod shell;
mod spark_tables;
mod start_positions;
mod state;
mod transaction_timeout;
