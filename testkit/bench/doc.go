// Package bench is the one home of what redokit's benchmarks share: the
// benchmarks program (module benchmarks) and `redokit bench` generate the
// same rows, drain a log with the same reader loop, measure lz4 on the same
// blocks and summarize repetitions the same way, so that their figures can
// be compared.
package bench
