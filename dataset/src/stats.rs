//! Dataset statistics (see `tokentap dataset stats`).
