//! Native benchmarks of tutti-core live in benches/.
