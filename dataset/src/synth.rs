//! Seeded synthesis of MLPerf-format trajectories.
