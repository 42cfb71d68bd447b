#!/usr/bin/env -S node --max-semi-space-size=8
// The V8 flags above are the service's, wherever it runs (npm start runs this file; the benchmark reads them from
// here): a young generation of 8 MB per semi-space instead of V8's up to 32 MB keeps peak RSS under load about
// 40 MB lower on Node 26 (20 on Node 20) at no measured cost in throughput (bench/README.md, "Memory").
import '../dist/cli/main.js'
